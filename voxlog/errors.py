"""Errors of the shared ``voxlog`` package (settings, wiring, broker adapter)."""


class VoxlogError(Exception):
    """Base class of every error raised by ``voxlog``."""


class BrokerUnavailable(VoxlogError):
    """Kafka could not be reached or refused a request; nothing was recorded."""


class TopicMismatch(VoxlogError):
    """An existing topic differs from what the settings ask for."""
