"""What an answer about a job shows its tenant: nothing of another tenant's, nothing of the operator's.

The projection decides whose a job is (``ProjectionReader.job`` with the key's tenant, before anything else is
read), and every answer about the job is cut to what that tenant may see, whichever route gives it (the plain
GET, ``?as_of=``, the history):

* a cache hit names its source job only when the source is the same tenant's: the projection's
  ``source_job_id``, which ``ProjectionReader.job`` nulls otherwise, is the reference for ``?as_of=``'s
  ``source_job_id`` and for the history's ``reused_from`` and ``JobCompleted``'s ``source_job_id``;
* the request's pronunciations leave out the words the server lexicon holds or held (``JobRecord.lexicon_words``):
  its entries are the operator's, applied to every tenant's text (audibly: a tenant can tell that a word has
  one) but never listed to a tenant, in the request as in the history's ``JobQueued``;
* the history's tenant is the projection's, so a job whose ``JobQueued`` left the log (retention) is not read
  as anyone else's, and a log that names another tenant is not shown;
* what the job waited behind on its worker names only the tenant's own jobs (another's id and tenant null).

``voxlog audit``, the operator's, shows the log as it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any, Protocol

import msgspec

from contracts import SynthesisRequest
from projections.reads.rows import JobRecord, SegmentRow


def shown_request(request: SynthesisRequest, lexicon_words: Collection[str]) -> SynthesisRequest:
    """``request`` without the pronunciations of ``lexicon_words`` (the server lexicon's)."""
    if not lexicon_words or not request.pronunciations:
        return request
    kept = {word: said for word, said in request.pronunciations.items() if word not in lexicon_words}
    return request.model_copy(update={"pronunciations": kept})


def _shown_request_json(request: Mapping[str, Any] | None, lexicon_words: Collection[str]) -> Any:
    if request is None or not lexicon_words:
        return request
    said = request.get("pronunciations") or {}
    return {**request, "pronunciations": {w: p for w, p in said.items() if w not in lexicon_words}}


def shown_source(source: uuid.UUID | str | None, job: JobRecord) -> uuid.UUID | None:
    """A cache hit's source as the tenant may see it: named only when the projection names it to the tenant
    (the same tenant's job; ``job`` is the row ``ProjectionReader.job`` read for the tenant)."""
    if source is None or job.source_job_id is None:
        return None
    source_id = source if isinstance(source, uuid.UUID) else uuid.UUID(source)
    return source_id if source_id == job.source_job_id else None


class JobReads(Protocol):
    async def job(self, job_id: uuid.UUID, tenant: str | None = None) -> JobRecord | None: ...


async def with_source(reader: JobReads, job: JobRecord, named: Any, tenant: str) -> JobRecord:
    """``job`` naming the source the log names (``named``), when that source is ``tenant``'s own job, whether
    or not the projection has shown the hit's completion yet (the projector may lag the log read)."""
    if named is None or job.source_job_id is not None:
        return job
    source = named if isinstance(named, uuid.UUID) else uuid.UUID(str(named))
    if await reader.job(source, tenant) is None:
        return job
    return msgspec.structs.replace(job, source_job_id=source)


def past_job(past: Mapping[str, Any], job: JobRecord) -> JobRecord:
    """``?as_of=``'s fold of the log (the shape of a ``jobs`` row), cut for the tenant of ``job`` (the
    projection's row of the same job, read for that tenant)."""
    return JobRecord.from_mapping(
        past,
        segments=tuple(map(SegmentRow.from_mapping, past["segments"])),
        source_job_id=shown_source(past["source_job_id"], job),
        lexicon_words=job.lexicon_words,
    )


def tenant_history(history: Mapping[str, Any], job: JobRecord, tenant: str) -> dict[str, Any] | None:
    """The history (``as_json`` of ``projections.audit``) as ``tenant``, whose job ``job`` the projection says it
    is, may see it; ``None`` when the log names another tenant as the job's owner."""
    if history.get("tenant") not in (None, tenant):
        return None

    def source(named: Any) -> str | None:
        shown = shown_source(named, job)
        return None if shown is None else str(shown)

    def event(entry: Mapping[str, Any]) -> dict[str, Any]:
        payload = dict(entry["payload"])
        if payload.get("waited"):
            payload["waited"] = _others_unnamed(payload["waited"], tenant)
        if "request" in payload:
            payload["request"] = _shown_request_json(payload["request"], job.lexicon_words)
        if payload.get("source_job_id") is not None:  # a completion's, fenced or applied
            payload["source_job_id"] = source(payload["source_job_id"])
        return {**entry, "payload": payload}

    return {
        **history,
        "tenant": tenant,  # the projection's: the log's is null once the job's JobQueued left it
        "request": _shown_request_json(history.get("request"), job.lexicon_words),
        "reused_from": source(history.get("reused_from")),
        "waited": [_others_unnamed(w, tenant) for w in history.get("waited", [])],
        "events": [event(e) for e in history["events"]],
    }


def _others_unnamed(waited: Mapping[str, Any], tenant: str) -> dict[str, Any]:
    """``waited`` with every job that is not ``tenant``'s unnamed (its id and tenant null)."""
    jobs = [t if t["tenant"] == tenant else {**t, "job_id": None, "tenant": None} for t in waited["jobs"]]
    return {**waited, "jobs": jobs}
