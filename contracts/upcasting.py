"""Upcasters: turn an event recorded under an older schema into the current one.

The rule of the contracts: a field added with a default is added without changing what an older record
means, and needs no code here: the model's default reads the older record (a ``JobQueued`` 2 with no
``tenant`` was the default tenant's, as the model's default says). A version says what an old reader
cannot take (every record is decoded with unknown fields refused, so a new field is one), and an upcaster
is written only where the older record means something the defaults do not say: a field that became
required, a value moved or renamed. :func:`upcast` walks the versions up, applying the step written for a
version and reading the others as they are. ``tests/fixtures/event_versions.json`` holds a record of every
earlier version of every type, and the log each version wrote, with what they read and replay as: the
defaults and the steps here are held to that (``tests/unit/test_event_versions.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.errors import UnsupportedSchemaVersion

RawEvent = dict[str, Any]
Upcaster = Callable[[RawEvent], RawEvent]


def _claim_v1_to_v2(raw: RawEvent) -> RawEvent:
    """``JobClaimed`` 2 names the worker's host; a version-1 claim did not record it."""
    payload = raw.get("payload")
    if isinstance(payload, dict):  # anything else is left for validation to reject
        raw = {**raw, "payload": {**payload, "host": None}}
    return raw


def _heartbeat_v1_to_v2(raw: RawEvent) -> RawEvent:
    """``NodeHeartbeat`` 2 lists every claim its worker holds, and the jobs waiting on it. A version-1
    worker held at most one claim, the job it names, running; it did not say what waited."""
    payload = raw.get("payload")
    if not isinstance(payload, dict):
        return raw
    claims = []
    if payload.get("job_id") is not None:
        fields = ("job_id", "fingerprint", "attempt", "segments_done", "segments_total", "progress_at")
        claim = {name: payload[name] for name in fields if name in payload}
        claims.append({**claim, "text_chars": payload.get("text_chars") or 0, "running": True})
    return {**raw, "payload": {**payload, "claims": claims, "queue": [], "queue_counts": []}}


# (event type, version it reads) -> function producing version + 1, where the defaults do not say it.
UPCASTERS: Mapping[tuple[str, int], Upcaster] = {
    ("JobClaimed", 1): _claim_v1_to_v2,
    ("NodeHeartbeat", 1): _heartbeat_v1_to_v2,
}


def upcast(
    raw: RawEvent,
    current_versions: Mapping[str, int],
    upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
) -> RawEvent:
    """Bring ``raw`` to the current schema version of its type."""
    event_type = raw.get("type")
    version = raw.get("schema_version")
    if not isinstance(event_type, str) or event_type not in current_versions:
        return raw  # left for validation to reject with a precise message
    if not isinstance(version, int) or isinstance(version, bool):
        raise UnsupportedSchemaVersion(f"{event_type}: schema_version must be an integer, got {version!r}")
    target = current_versions[event_type]
    if version < 1:
        raise UnsupportedSchemaVersion(f"{event_type}: schema_version {version}: versions start at 1")
    if version > target:
        raise UnsupportedSchemaVersion(
            f"{event_type} schema_version {version} is newer than this code reads ({target}); upgrade voxlog"
        )
    while version < target:
        step = upcasters.get((event_type, version))
        if step is not None:  # else the newer version only added fields whose defaults read the older record
            raw = step(raw)
        version += 1
        raw["schema_version"] = version
    return raw
