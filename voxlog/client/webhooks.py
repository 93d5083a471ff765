"""Standard Webhooks signatures (https://www.standardwebhooks.com): what a receiver of voxlog's webhooks checks.

A delivery carries ``webhook-id`` (the same on every retry of one delivery: de-duplicate on it),
``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` (``v1,<base64 HMAC-SHA256>``, several separated
by spaces while a secret is being rotated), over ``{id}.{timestamp}.{body}`` with the endpoint's secret
(``whsec_`` and the key in base64).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping
from typing import Final

from contracts.webhook_signatures import signature
from voxlog.errors import VoxlogError

TOLERANCE_S: Final = 300
"""How far a delivery's timestamp may be from the receiver's clock (a replayed old delivery is refused)."""


class WebhookVerificationError(VoxlogError):
    """The delivery's signature does not verify: not from voxlog, altered, or too old or new."""


def sign_webhook(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of one delivery (one secret's)."""
    try:
        return signature(secret, webhook_id, timestamp, body)
    except ValueError as exc:
        raise WebhookVerificationError(f"the secret is not `whsec_` and base64: {exc}") from exc


def verify_webhook(
    headers: Mapping[str, str], body: bytes, secret: str, *, now: float | None = None, tolerance_s: int = TOLERANCE_S
) -> None:
    """Raise :class:`WebhookVerificationError` unless ``body`` with ``headers`` was signed with ``secret`` within
    ``tolerance_s`` of ``now``. ``headers`` as received (any case)."""
    lower = {name.lower(): value for name, value in headers.items()}
    try:
        webhook_id, stamp, signatures = (lower[n] for n in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    except KeyError as exc:
        raise WebhookVerificationError(f"the delivery has no {exc.args[0]} header") from None
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError(f"webhook-timestamp is not a number: {stamp!r}") from None
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance_s:
        raise WebhookVerificationError(
            f"webhook-timestamp is {clock - timestamp:+.0f} s from now (more than {tolerance_s} s): replayed or skewed"
        )
    expected = sign_webhook(secret, webhook_id, timestamp, body).encode()
    if not any(hmac.compare_digest(expected, given.encode()) for given in signatures.split()):
        raise WebhookVerificationError("no signature of webhook-signature matches the body with this secret")
