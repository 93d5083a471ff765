"""POST /v1/batches: up to VOXLOG_MAX_BATCH requests in one call, each its own job.

Every request is validated before anything is recorded: one bad request
answers 422 with the position and the reason of each bad one, and nothing of
the batch is on the log. Then the result cache is read once for the whole
batch; a request whose result is live is answered with that job, the others
are handed to Kafka together (the producer packs them into a few requests
instead of one round trip each) and acknowledged (acks=all) before the answer.

Each request gets its own job id and fingerprint, so the jobs spread over
every partition and every worker, and duplicates (in the batch or across
batches) coalesce as any other submission does. With an Idempotency-Key the
job of the request at position ``i`` is named by the key, ``i`` and the
request, so a retried batch names the same jobs; a batch the log took only
in part (503) can be retried that way, and without a key the 503 gives one to
retry with.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Final

from litestar import Request, Response, post
from litestar.exceptions import HTTPException
from litestar.params import HeaderParameter, JSONBody
from pydantic import BaseModel, ConfigDict, Field

from foundation.errors import BrokerUnavailable
from foundation.metrics import SUBMISSIONS
from producers.deps import deps_of
from producers.queries import ProjectionUnavailable
from producers.submit import JobRequest, Rejected, job_id_for, queued_event, scoped_key, still_stored, validate

MAX_BODY_BYTES: Final = 256 * 1024 * 1024  # 10,000 requests of 5,000 characters, escaped, fit


class BatchRequest(BaseModel):
    """POST /v1/batches body."""

    model_config = ConfigDict(extra="forbid")

    requests: list[JobRequest] = Field(
        description="The requests, each as POST /v1/jobs takes it; their priority is batch unless they say."
    )


def item_key(batch_key: str, index: int) -> str:
    """The idempotency key of the request at ``index`` of a batch submitted with (scoped) ``batch_key``."""
    return f"{batch_key}#{index}"


@post(
    "/v1/batches",
    status_code=202,
    summary="Submit many requests at once, each its own job",
    request_max_body_size=MAX_BODY_BYTES,
)
async def submit_batch(
    request: Request[Any, Any, Any],
    data: JSONBody[BatchRequest],
    idempotency_key: Annotated[str | None, HeaderParameter(name="Idempotency-Key")] = None,
) -> Response[dict[str, Any]]:
    """202 with one entry per request, in order: its job, and whether it was queued or answered from the cache."""
    deps = deps_of(request)
    count = len(data.requests)
    if not 1 <= count <= deps.limits.max_batch:
        raise HTTPException(
            detail=f"a batch holds 1 to {deps.limits.max_batch} requests, not {count}: split it", status_code=413
        )
    try:
        key = scoped_key(idempotency_key, request.headers.get("authorization")) if idempotency_key else None
        engines = await deps.reader.engines()
    except Rejected as exc:
        raise HTTPException(detail=str(exc), status_code=exc.status) from exc
    syntheses, refused = [], []
    for index, body in enumerate(data.requests):
        try:
            syntheses.append(validate(body, deps.limits, engines))
        except Rejected as exc:
            if exc.status == 503:
                raise HTTPException(detail=str(exc), status_code=503, headers=exc.headers()) from exc
            refused.append({"index": index, "status": exc.status, "detail": str(exc)})
    if refused:
        detail = f"{len(refused)} of {count} requests are invalid; nothing was submitted: fix them and send the batch"
        return Response({"status_code": 422, "detail": detail, "errors": refused[:100]}, status_code=422)

    fingerprints = [s.fingerprint() for s in syntheses]
    try:
        cached = await still_stored(deps.blobs, await deps.reader.cached_results(fingerprints))
    except ProjectionUnavailable:
        cached = {}  # the read side is down, the log is not: take every job (workers coalesce)
    # Without a key the batch gets one, in the client's scope, so that the 503 can name it for a retry.
    retry_key = key or scoped_key(str(uuid.uuid4()), request.headers.get("authorization"))
    jobs: list[dict[str, Any]] = []
    events = []
    for index, (body, synthesis, fingerprint) in enumerate(zip(data.requests, syntheses, fingerprints, strict=True)):
        if (done := cached.get(fingerprint)) is not None:
            jobs.append({"index": index, "job_id": done, "fingerprint": fingerprint, "state": "completed"})
            continue
        job_key = item_key(retry_key, index)
        job_id = job_id_for(job_key, fingerprint)
        priority = body.priority if "priority" in body.model_fields_set else "batch"
        events.append(queued_event(synthesis, job_id, job_key, deps.producer, priority))
        jobs.append({"index": index, "job_id": job_id, "fingerprint": fingerprint, "state": "queued"})
    if events and deps.admission is not None:
        try:
            await deps.admission.admit(
                [e.fingerprint for e in events], sum(len(e.payload.request.text) for e in events)
            )
        except Rejected as exc:
            raise HTTPException(detail=str(exc), status_code=exc.status, headers=exc.headers()) from exc
    try:
        await deps.publisher.publish_all(events)
    except BrokerUnavailable as exc:
        retry = idempotency_key or retry_key.partition("/")[2]
        detail = (
            f"the job log did not confirm the whole batch ({exc}); part of it may be recorded. Send it again with "
            f"the header Idempotency-Key: {retry} so that the retry names the same jobs"
        )
        raise HTTPException(detail=detail, status_code=503, headers={"Retry-After": "5"}) from exc
    SUBMISSIONS.labels("queued").inc(len(events))
    SUBMISSIONS.labels("cached").inc(count - len(events))
    return Response({"queued": len(events), "cached": count - len(events), "jobs": jobs}, status_code=202)
