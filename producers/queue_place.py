"""A queued job's place on the worker it waits on, and when it may start, as the API shows it: made from the
worker's last heartbeat's listing of it (:mod:`projections.reads.queue_place`, which says what the figures are)."""

from __future__ import annotations

from datetime import datetime, timedelta

from contracts.scheduling import HeldClaim
from producers.views import QueuePlaceView
from projections.reads.queue_place import QueueRow


def remaining_chars(claim: HeldClaim) -> float:
    """A held claim's text still to synthesize: its share of segments not done (all of it when not known)."""
    if not claim.segments_total:
        return float(claim.text_chars)
    left = max(claim.segments_total - claim.segments_done, 0)
    return claim.text_chars * left / claim.segments_total


def queue_place(
    worker: str,
    sent_at: datetime,
    chars_per_s: float | None,
    claims: list[HeldClaim],
    place: int,
    chars_before: int,
    now: datetime,
) -> QueuePlaceView:
    """The place of the job listed ``place``-th (from 1) in ``worker``'s queue, behind its ``claims`` and the
    ``chars_before`` characters of the jobs listed before it."""
    ahead_chars = sum(map(remaining_chars, claims)) + chars_before
    start = None if not chars_per_s else now + timedelta(seconds=ahead_chars / chars_per_s)
    return QueuePlaceView(
        worker=worker,
        position=len(claims) + place,
        estimated_start=start,
        heartbeat_at=sent_at,
        heartbeat_age_s=round(max((now - sent_at).total_seconds(), 0.0), 3),
    )


def place_view(row: QueueRow, now: datetime) -> QueuePlaceView:
    return queue_place(row.worker, row.sent_at, row.chars_per_s, row.claims, row.place, row.chars_before, now)
