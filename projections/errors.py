"""Errors raised by the projections package."""


class ProjectionError(Exception):
    """Base class of every error raised by ``projections``."""


class MigrationError(ProjectionError):
    """The migrations on disk and those recorded in the database disagree, or one failed."""
