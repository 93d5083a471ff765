"""Whatever the API accepts, the projector can store: no accepted job is dead-lettered by Postgres."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from foundation.kafka import RecordPosition
from producers.auth import ANONYMOUS
from producers.errors import Rejected
from producers.idempotency import fresh_key, scoped_key
from producers.requests import JobRequest, Limits
from producers.submission import Item, Submission, Submissions
from producers.submission_log import SubmissionLog
from projections.batch_apply import apply_events
from projections.reducer import Outcome
from tests.support.api_fakes import PRODUCER, Blobs, Log, Reader

LIMITS = Limits(max_text_chars=5000, min_speed=0.5, max_speed=2.0, default_engine="kokoro-onnx")
AT = RecordPosition("jobs", 0, 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=60), key=st.none() | st.text(max_size=20))
@example(text="\u0000\u0001 control", key=None)
@example(text="nul \x00 inside", key="k\x00")
async def test_regression_text_the_api_accepts_is_never_refused_by_the_projector(pg, text, key):
    """Text with NUL was accepted (202), then Postgres refused its JobQueued and the job was 404 forever."""
    log = Log()
    submissions = Submissions(Reader(), SubmissionLog(log, LIMITS.max_record_bytes), Blobs(), LIMITS, PRODUCER)  # type: ignore[arg-type]
    try:
        scoped = scoped_key(key, None) if key is not None else fresh_key(None)
        body = JobRequest(text=text, voice="af_heart")
        await submissions.submit(Submission([Item(body, "interactive")], scoped, key is not None, ANONYMOUS))
    except Rejected as refused:
        assert refused.status in (413, 422)  # noqa: PT017 - refusing is one of the two outcomes, not the test's subject
        return
    [event] = log.published
    assert await apply_events(pg, [(event, AT)], cache_ttl=timedelta(minutes=1)) == [(event, Outcome.APPLIED)]
