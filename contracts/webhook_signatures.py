"""Standard Webhooks signatures (https://www.standardwebhooks.com), as voxlog signs its deliveries, and the
endpoints' signing secrets.

A delivery is signed ``v1,<base64 HMAC-SHA256>`` over ``{webhook-id}.{webhook-timestamp}.{body}`` with the
endpoint's secret, ``whsec_`` and the key in base64. voxlog records no secret anywhere: an endpoint's secret is
derived from the server's signing key (``VOXLOG_WEBHOOK_SIGNING_KEY``, held by the API and the delivery
process), the endpoint's id and its secret's generation, so the log and the tables hold nothing that signs,
a rotation is a generation more, and a registration retried with its Idempotency-Key shows the same secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (the format's prefix, not a secret)


def endpoint_secret(signing_key: bytes, endpoint_id: uuid.UUID, generation: int) -> str:
    """The ``whsec_`` secret of ``endpoint_id`` at ``generation`` under the server's ``signing_key``."""
    if not signing_key:
        raise ValueError("no signing key: webhooks need VOXLOG_WEBHOOK_SIGNING_KEY")
    derived = hmac.new(signing_key, f"voxlog webhook secret/{endpoint_id}/{generation}".encode(), hashlib.sha256)
    return SECRET_PREFIX + base64.b64encode(derived.digest()).decode()


def secret_key(secret: str) -> bytes:
    """The key a ``whsec_`` secret holds (``ValueError`` when it is not base64)."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,`` signature of a delivery; ``webhook-signature`` lists one per secret in force, by spaces."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(secret_key(secret), signed, hashlib.sha256).digest()).decode()
