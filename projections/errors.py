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


class Fenced(ProjectionError):
    """A newer projector owns a partition of the batch (projections.shards): the batch was refused, whole."""

    def __init__(self, consumer: str, partitions: list[tuple[str, int]], detail: str) -> None:
        super().__init__(f"projector {consumer!r} was fenced off a partition of its batch: {detail}")
        self.partitions = partitions


class SharedRowChanged(ProjectionError):
    """A row the batch read that other partitions' events also change was changed meanwhile, by another
    projector (projections.shared_rows): the batch was refused, whole, and is applied again from a fresh read."""


class ProjectionUnavailable(ProjectionError):
    """PostgreSQL (the projections) cannot be read right now: the read model's readers raise it, and their
    callers wait it out or answer 503."""
