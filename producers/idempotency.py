"""Idempotency keys: how a retry names what its first attempt named, and nothing of another client's.

A client's key is scoped to the client that sent it (:func:`scoped_key`), and
every id a submission makes derives from the scoped key and the request: a
job's from the key and its fingerprint, a document's from the key and the
document's bytes and options. So a retry with the same key and the same
request names the same job or document whether or not the first attempt was
recorded, and a key reused with another request never names the first one's.
A submission sent without a key gets a fresh one, in the client's scope, so
that an answer that could not say whether it was recorded can name a key to
retry with.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Final

from contracts.request_text import first_refused_character
from producers.errors import Rejected

IDEMPOTENCY_NAMESPACE: Final = uuid.UUID("0b8f6d1e-5a3c-4f0e-9d57-3f1c2a9e8b40")
DOCUMENT_NAMESPACE: Final = uuid.UUID("a41f7c3e-0d2b-4e58-8f6a-2b9c5d1e7f30")
MAX_IDEMPOTENCY_KEY: Final = 200


def scope_of(authorization: str | None, tenant: str | None = None) -> str:
    """The client's scope: its tenant (``t/<tenant>``), else, while auth is off, a hash of its ``Authorization``
    header (``anon`` without one)."""
    if tenant is not None:
        return f"t/{tenant}"
    return "anon" if not authorization else "c" + hashlib.sha256(authorization.encode()).hexdigest()[:16]


def scoped_key(idempotency_key: str, authorization: str | None, tenant: str | None = None) -> str:
    """The key as the log records it: scoped to the client that sent it (its tenant, with API keys).

    Two clients that pick the same key are two keys, and another tenant cannot name this tenant's jobs and
    documents. The scoped key, not the client's alone, is what ``jobs.idempotency_key`` holds.
    """
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise Rejected(f"Idempotency-Key has {len(idempotency_key)} characters; the limit is {MAX_IDEMPOTENCY_KEY}")
    refused = first_refused_character(idempotency_key)
    if refused is not None or not idempotency_key.strip():
        raise Rejected(
            "Idempotency-Key must be printable text" + (f": it contains {refused.describe()}" if refused else "")
        )
    return f"{scope_of(authorization, tenant)}/{idempotency_key}"


def client_key(scoped: str) -> str:
    """What the client sends as ``Idempotency-Key`` for the scoped key ``scoped``."""
    scope, _, key = scoped.partition("/")
    return key.partition("/")[2] if scope == "t" else key


def fresh_key(authorization: str | None, tenant: str | None = None) -> str:
    """A new scoped key, for a submission sent without one."""
    return f"{scope_of(authorization, tenant)}/{uuid.uuid4()}"


def job_id_for(key: str, fingerprint: str) -> uuid.UUID:
    """The job a (scoped) key names for a request: the fingerprint is part of the name, so a key reused with
    another request never names the first request's job, even before the projection shows that job."""
    return uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{key}\n{fingerprint}")


def item_key(key: str, index: int) -> str:
    """The key of the request at ``index`` of a submission of several, sent with (scoped) ``key``."""
    return f"{key}#{index}"


def document_id_for(key: str, digest: str) -> uuid.UUID:
    """The document a (scoped) key names for a document whose bytes and options hash to ``digest``."""
    return uuid.uuid5(DOCUMENT_NAMESPACE, f"{key}\n{digest}")
