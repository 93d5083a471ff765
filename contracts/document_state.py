"""A document's state from its parts' states: one rule, which the API's progress and the webhooks' outcomes share.

A part with nothing to speak (the engine rejected its input, such as a line of ``* * *``) is a pause in the
document's audio, not a failure. A document is completed when every part is done, failed as soon as a part
failed for another reason, cancelled once a part was cancelled (the document was), and queued or running
until then; a part the projection does not show yet counts as queued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, Protocol

from contracts.job_state import JobState

DocumentState = Literal["queued", "running", "completed", "failed", "cancelled"]
SILENT_CODE: Final = "input_rejected"  # the engine found nothing to speak in the part's text


class PartState(Protocol):
    @property
    def state(self) -> JobState: ...

    @property
    def error_code(self) -> str | None: ...


def part_silent(part: PartState) -> bool:
    """The engine found nothing to speak in it: it is a pause in the document's audio, not a failure."""
    return part.state is JobState.FAILED and part.error_code == SILENT_CODE


def part_done(part: PartState) -> bool:
    """Its audio (or its pause) is in the document's audio."""
    return part.state is JobState.COMPLETED or part_silent(part)


def document_state(parts: Sequence[PartState | None]) -> DocumentState:
    """The state of a document whose parts, in order, are ``parts`` (``None``: not projected yet)."""
    if all(p is not None and part_done(p) for p in parts):
        return "completed"
    states = {p.state if p else JobState.QUEUED for p in parts}
    if JobState.CANCELLED in states:
        return "cancelled"
    if any(p is not None and p.state is JobState.FAILED and not part_silent(p) for p in parts):
        return "failed"
    return "running" if states != {JobState.QUEUED} else "queued"
