"""Errors raised by the contracts package."""


class ContractError(Exception):
    """Base class of every error raised by ``contracts``."""


class DecodeError(ContractError):
    """A record could not be turned into an event (bad JSON, unknown type, invalid field)."""


class UnsupportedSchemaVersion(DecodeError):
    """A record carries a schema version this code cannot read or upcast."""


class InvalidRequest(ContractError):
    """A synthesis request violates a contract rule (empty text, bad speed, ...)."""
