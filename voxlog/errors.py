"""Errors of the application (the CLI, topic bootstrap, the demo)."""


class VoxlogError(Exception):
    """Base class of every error raised by ``voxlog``."""


class TopicMismatch(VoxlogError):
    """An existing topic differs from what the settings ask for."""
