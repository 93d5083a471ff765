"""Upcasters: turn an event recorded under an older schema into the current one.

An upcaster takes the raw JSON object of ``(type, version)`` and returns the
object of ``(type, version + 1)``. Decoding applies them in a chain until the
record reaches the version the models describe, so the whole history of the
log stays readable after a schema change.
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


def _not_waited(raw: RawEvent) -> RawEvent:
    """``JobClaimed`` 3 and ``JobCompleted`` 2 say what the job waited behind on its worker
    (:mod:`contracts.scheduling`); an older record did not."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "waited": None}}
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


def _queued_v1_to_v2(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 2 says whether the text is normalized before G2P, and the job's priority. Version 1
    requests were not asked: they normalize (their fingerprints, which leave the default out, stay the
    same) and are interactive, as every job was."""
    payload = raw.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("request"), dict):
        request = {**payload["request"], "normalize": True}
        raw = {**raw, "payload": {**payload, "request": request, "priority": "interactive"}}
    return raw


def _segment_v1_to_v2(raw: RawEvent) -> RawEvent:
    """``SegmentProduced`` 2 names the segment's key and whether its audio was reused; version 1 segments
    were all synthesized, under no recorded key."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "segment_key": None, "reused": False}}
    return raw


def _segment_v2_to_v3(raw: RawEvent) -> RawEvent:
    """``SegmentProduced`` 3 says when each word is said; a version-2 segment did not record it."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "words": None}}
    return raw


def _as_it_is(raw: RawEvent) -> RawEvent:
    """A step whose newer version only admits more (a new value): the older record reads as it is. The step
    stays in the chain all the same, for :func:`upcast` refuses a version with no step to the next."""
    return raw


def _queued_v2_to_v3(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 3 names the tenant that owns the job and the API key it came with; a version-2 job was
    the default tenant's (there was one), under no key, its audio shared (no cache scope)."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "tenant": "default", "key_id": None}}
    return raw


def _queued_v3_to_v4(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 4 records the trace of the request that submitted the job; a version-3 job recorded
    none (its events share the trace its id gives: :func:`contracts.trace_context.trace_of_job`)."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "traceparent": None}}
    return raw


def _queued_v4_to_v5(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 5 says whether degraded mode rewrote the request; a version-4 job was never degraded (the
    mode did not exist), so its request is the one its client asked for."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "degraded_from": None}}
    return raw


def _document_v2_to_v3(raw: RawEvent) -> RawEvent:
    """``DocumentSubmitted`` 3 names the tenant that owns the document: version 2's was the default one."""
    payload = raw.get("payload")
    if isinstance(payload, dict):
        raw = {**raw, "payload": {**payload, "tenant": "default"}}
    return raw


def _as_text(raw: RawEvent) -> RawEvent:
    """Its ``payload.request`` read as text (``input_format``), as every request before SSML was."""
    payload = raw.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("request"), dict):
        raw = {**raw, "payload": {**payload, "request": {**payload["request"], "input_format": "text"}}}
    return raw


def _queued_v5_to_v6(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 6 says how the request's text is read: text or SSML. Every version-5 request was text."""
    return _as_text(raw)


def _document_v3_to_v4(raw: RawEvent) -> RawEvent:
    """``DocumentSubmitted`` 4's request says how its text is read; a document's is text, as it always was."""
    return _as_text(raw)


def _without_pronunciations(raw: RawEvent) -> RawEvent:
    """Its ``payload.request`` with no pronunciations, as every request before them was."""
    payload = raw.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("request"), dict):
        raw = {**raw, "payload": {**payload, "request": {**payload["request"], "pronunciations": {}}}}
    return raw


def _queued_v6_to_v7(raw: RawEvent) -> RawEvent:
    """``JobQueued`` 7 names the words its request says as given phonemes; a version-6 request said every word
    by G2P (or an SSML ``<phoneme>``, which its text keeps)."""
    return _without_pronunciations(raw)


def _document_v4_to_v5(raw: RawEvent) -> RawEvent:
    """``DocumentSubmitted`` 5's request may give pronunciations; a version-4 document gave none."""
    return _without_pronunciations(raw)


# (event type, version it reads) -> function producing version + 1.
UPCASTERS: Mapping[tuple[str, int], Upcaster] = {
    ("JobClaimed", 1): _claim_v1_to_v2,
    ("JobQueued", 1): _queued_v1_to_v2,
    ("SegmentProduced", 1): _segment_v1_to_v2,
    # DocumentSubmitted 2 may hold the scene break "b" in breaks; a version-1 record has none.
    ("DocumentSubmitted", 1): _as_it_is,
    ("JobQueued", 2): _queued_v2_to_v3,
    ("JobQueued", 3): _queued_v3_to_v4,
    ("JobQueued", 4): _queued_v4_to_v5,
    # ServiceModeSet 2 may name the mode "degraded"; a version-1 switch was cache-only, the only mode there was.
    ("ServiceModeSet", 1): _as_it_is,
    ("DocumentSubmitted", 2): _document_v2_to_v3,
    ("SegmentProduced", 2): _segment_v2_to_v3,
    ("JobQueued", 5): _queued_v5_to_v6,
    ("DocumentSubmitted", 3): _document_v3_to_v4,
    ("JobQueued", 6): _queued_v6_to_v7,
    ("DocumentSubmitted", 4): _document_v4_to_v5,
    # JobQueued 8 may name the document the job is a part of; a version-7 record named none (None, its default).
    ("JobQueued", 7): _as_it_is,
    ("JobClaimed", 2): _not_waited,
    ("JobCompleted", 1): _not_waited,
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
    if version > target:
        raise UnsupportedSchemaVersion(
            f"{event_type} schema_version {version} is newer than this code reads ({target}); upgrade voxlog"
        )
    while version < target:
        step = upcasters.get((event_type, version))
        if step is None:
            raise UnsupportedSchemaVersion(f"no upcaster from {event_type} v{version} to v{version + 1}")
        raw = step(raw)
        version += 1
        raw["schema_version"] = version
    return raw
