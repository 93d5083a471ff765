"""POST /v1/batches: up to VOXLOG_MAX_BATCH requests in one call, each its own job.

A batch is a :class:`~producers.submission.Submission` of many items: every
request is validated before anything is recorded (one bad request answers 422
with the position and the reason of each bad one), the result cache is read
once for the whole batch, and the new jobs are handed to Kafka together (the
producer packs them into a few requests instead of one round trip each) and
acknowledged (acks=all) before the answer.

Each request gets its own job id and fingerprint, so the jobs spread over
every partition and every worker, and duplicates (in the batch or across
batches) coalesce as any other submission does. With an Idempotency-Key the
job of the request at position ``i`` is named by the key, ``i`` and the
request, so a retried batch names the same jobs; a batch the log took only in
part (503) can be retried that way, and without a key the 503 gives one.
"""

from __future__ import annotations

from typing import Any, Final

from litestar import Request, Response, post
from litestar.params import JSONBody
from pydantic import BaseModel, ConfigDict, Field

from contracts import JobState
from producers.api_keys import Principal
from producers.auth import SUBMIT
from producers.deps import Injected
from producers.errors import Rejected
from producers.http_errors import responses
from producers.job_routes import IdempotencyKey, submission_key
from producers.rate_limit import RateLimiter
from producers.requests import JobRequest
from producers.submission import Answer, Item, Submission, Submissions
from producers.views import BatchAccepted, BatchItemView

MAX_BODY_BYTES: Final = 256 * 1024 * 1024  # 10,000 requests of 5,000 characters, escaped, fit


class BatchRequest(BaseModel):
    """POST /v1/batches body."""

    model_config = ConfigDict(extra="forbid")

    requests: list[JobRequest] = Field(
        description="The requests, each as POST /v1/jobs takes it; their priority is batch unless they say."
    )


@post(
    "/v1/batches",
    status_code=202,
    summary="Submit many requests at once, each its own job",
    request_max_body_size=MAX_BODY_BYTES,
    guards=SUBMIT,
    responses=responses(400, 401, 403, 409, 413, 422, 429, 503),
)
async def submit_batch(
    data: JSONBody[BatchRequest],
    submissions: Injected[Submissions],
    principal: Injected[Principal],
    limiter: Injected[RateLimiter | None],
    request: Request[Any, Any, Any],
    idempotency_key: IdempotencyKey = None,
) -> Response[BatchAccepted]:
    """202 with one entry per request, in order: its job, and whether it was queued or answered by a job that
    exists already (its audio is cached, or the key named it before)."""
    count, most = len(data.requests), submissions.limits.max_batch
    if not 1 <= count <= most:
        raise Rejected(f"a batch holds 1 to {most} requests, not {count}: split it", 413)
    key, sent = submission_key(idempotency_key, principal, request)
    items = [Item(body, body.priority if "priority" in body.model_fields_set else "batch") for body in data.requests]
    submitted = await submissions.submit(Submission(items, key, sent, principal))
    if limiter is not None:  # a job a token, as many requests: the first was paid for by this request's token
        await limiter.charge(principal, count)
    jobs = [
        BatchItemView(
            index=a.index,
            job_id=a.job_id,
            fingerprint=a.fingerprint,
            state=JobState.COMPLETED if a.answer is Answer.CACHED else a.job.state if a.job else JobState.QUEUED,
        )
        for a in submitted.answers
    ]
    accepted = BatchAccepted(queued=submitted.queued, cached=count - submitted.queued, jobs=jobs)
    return Response(accepted, status_code=202)
