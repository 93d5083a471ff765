"""Errors of the shared building blocks (settings, the Kafka and Postgres adapters, blobs, audio)."""


class FoundationError(Exception):
    """Base class of every error raised by ``foundation``."""


class BrokerUnavailable(FoundationError):
    """Kafka could not be reached or refused a request; nothing was recorded."""


class PublishUnconfirmed(BrokerUnavailable):
    """A record was handed to Kafka but not acknowledged in time: it may or may not be in the log."""
