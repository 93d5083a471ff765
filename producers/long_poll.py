"""Waiting without polling: ``Prefer: wait=N`` (RFC 7240) on a job's or a document's status.

A client that wants to know when a job ends sends ``GET /v1/jobs/{id}`` with ``Prefer: wait=25``: the answer
comes when the job changed from what that request first read (its state, or a segment more), or after 25 s,
whichever is first, with ``Preference-Applied: wait=25`` so the client knows the server waited (an older
server ignores the header and answers at once; the client then paces its reads itself). The wait rides on
the projector's change notifications (:class:`producers.ports.JobChangeFeed`), registered before each read
so that a change between two reads is never missed; no database connection is held while waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable
from typing import Annotated, Final, TypeVar

from litestar.params import HeaderParameter

from producers.ports import JobChangeFeed

WAIT_MAX_S: Final = 60.0
"""The longest wait the API grants (a longer preference is cut to it; the client asks again)."""

PreferHeader = Annotated[
    str | None,
    HeaderParameter(
        name="Prefer",
        description=(
            f"`wait=N` (RFC 7240): answer once this changes from what it is now, or after N seconds (at most"
            f" {WAIT_MAX_S:g}); the answer then carries `Preference-Applied: wait=N`."
        ),
    ),
]

_WAIT: Final = re.compile(r"(?:^|[,;\s])wait\s*=\s*\"?(\d{1,6}(?:\.\d{1,3})?)\"?(?:$|[,;\s])", re.IGNORECASE)

T = TypeVar("T")


def preferred_wait(prefer: str | None) -> float | None:
    """The ``wait`` preference of a ``Prefer`` header in seconds, cut to :data:`WAIT_MAX_S`; None without one.

    Preferences are hints (RFC 7240): one that cannot be read is ignored, never an error."""
    if not prefer:
        return None
    found = _WAIT.search(prefer)
    if found is None:
        return None
    return min(float(found.group(1)), WAIT_MAX_S)


def applied(seconds: float) -> dict[str, str]:
    """The header saying the wait was honoured."""
    return {"Preference-Applied": f"wait={seconds:g}"}


async def until_changed(
    changes: JobChangeFeed,
    read: Callable[[], Awaitable[T]],
    signature: Callable[[T], Hashable],
    watched: Callable[[T], uuid.UUID | None],
    seconds: float,
) -> T:
    """Read until what ``signature`` says of the value differs from the first read, no job is left to watch
    (``watched`` is None: it ended), or ``seconds`` passed; returns the last value read.

    ``watched`` names the job whose changes can change the value (a job's own id; a document's first part
    that is still live)."""
    deadline = time.monotonic() + seconds
    value = await read()
    first = signature(value)
    while (job := watched(value)) is not None and (left := deadline - time.monotonic()) > 0:
        with changes.watch(job) as change:
            value = await read()  # after the watch is registered: a change made meanwhile wakes it
            if signature(value) != first or watched(value) != job:
                if signature(value) != first:
                    return value
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(change.wait(), left)
        value = await read()
        if signature(value) != first:
            return value
    return value
