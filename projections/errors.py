"""Errors raised by the projections package."""


class ProjectionError(Exception):
    """Base class of every error raised by ``projections``."""


class MigrationError(ProjectionError):
    """The migrations on disk and those recorded in the database disagree, or one failed."""


class DatabaseUnavailable(MigrationError):
    """PostgreSQL could not be reached (refused, dropped, timed out): try again later."""


class MigrationsPending(MigrationError):
    """The schema lacks migrations this code needs, and this process may not apply them: wait for one that may."""


class ProjectionGap(ProjectionError):
    """The log no longer holds records the projector has not applied yet: it refuses to skip them."""
