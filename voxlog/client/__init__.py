"""voxlog's Python client: the API's operations with its retry protocol built in, blocking or asyncio.

::

    from voxlog.client import Client

    with Client("http://127.0.0.1:8000", api_key="vxl_...") as voxlog:
        job = voxlog.submit_job("Hello there.", "af_heart")
        done = voxlog.wait(job.job_id)          # the API holds each read until the job changes
        audio = voxlog.audio(done.job_id)

Every submission carries an ``Idempotency-Key`` (the caller's, or one made per call), and a request that got
no answer, a 503, 502, 504 or a 429 is sent again with it, after ``Retry-After`` or a jittered backoff, within
:class:`RetryPolicy`'s bounds; a retried submission names the same job. :func:`verify_webhook` checks a
delivery's Standard Webhooks signature.
"""

from voxlog.client.aio import AsyncClient
from voxlog.client.operations import DocumentSubmitted, WaitTimeout
from voxlog.client.protocol import ApiError, RetryPolicy
from voxlog.client.sync import Client
from voxlog.client.webhooks import WebhookVerificationError, sign_webhook, verify_webhook

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "DocumentSubmitted",
    "RetryPolicy",
    "WaitTimeout",
    "WebhookVerificationError",
    "sign_webhook",
    "verify_webhook",
]
