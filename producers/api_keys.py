"""API keys: what a key looks like, and how the API tells a presented key from a forged one.

A key is ``vxl_<id>_<secret>``: ``id`` (12 hex digits) is public, the row of
``api_keys`` it is looked up by, and what the log and the logs name; ``secret``
(32 random bytes, URL-safe base64) is shown once, when the key is made, and
only its sha256 is ever recorded (in ``ApiKeyIssued``). A presented key is
good when its id's row exists, is neither revoked nor expired, and the
sha256 of its secret equals the recorded one, compared in constant time.

The API keeps what it read of a key for ``cache_s`` (2 s: ``voxlog.composition.api.AUTH_CACHE_S``):
a revocation is refused by every API instance at most that long after the
projector applied it. While PostgreSQL cannot be read, a key read before is
judged by what was read (a key never read answers 503).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Final

from contracts import Scope, utc_now
from producers.errors import ProducerError
from projections.reads.rows import StoredKey

KEY_PATTERN: Final = re.compile(r"vxl_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
ALL_SCOPES: Final[frozenset[Scope]] = frozenset({"submit", "read", "admin", "operator"})


@dataclass(frozen=True)
class NewKey:
    key_id: str
    secret: str

    @property
    def token(self) -> str:
        """What the client sends: ``Authorization: Bearer <token>`` or ``X-API-Key: <token>``."""
        return f"vxl_{self.key_id}_{self.secret}"

    @property
    def secret_sha256(self) -> str:
        return secret_hash(self.secret)


def new_key() -> NewKey:
    return NewKey(secrets.token_hex(6), secrets.token_urlsafe(32))


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for: a tenant, through a key (``None`` while auth is off), with its scopes."""

    tenant: str
    key_id: str | None
    scopes: frozenset[str]


class Unauthenticated(ProducerError):
    """No key, or a key that is not good (401): the message says which, never what the secret was."""


def parse(token: str) -> tuple[str, str]:
    match = KEY_PATTERN.fullmatch(token.strip())
    if match is None:
        raise Unauthenticated("the API key is malformed: a key looks like vxl_<12 hex digits>_<43 characters>")
    return match.group(1), match.group(2)


def proves(stored: StoredKey | None, secret: str) -> bool:
    """Whether ``secret`` is the stored key's (compared in constant time); revocation and expiry aside."""
    return stored is not None and hmac.compare_digest(secret_hash(secret), stored.secret_sha256 or "-")


def judge(stored: StoredKey | None, key_id: str, secret: str) -> Principal:
    """The principal ``secret`` proves, or :class:`Unauthenticated` with why (the same answer for an unknown id
    and a wrong secret, so that ids cannot be probed)."""
    if stored is None or not proves(stored, secret):
        raise Unauthenticated(f"API key {key_id} is not valid")
    if stored.revoked_at is not None:
        raise Unauthenticated(f"API key {key_id} was revoked at {stored.revoked_at.isoformat()}")
    if stored.expires_at is not None and stored.expires_at <= utc_now():
        raise Unauthenticated(f"API key {key_id} expired at {stored.expires_at.isoformat()}")
    return Principal(stored.tenant, key_id, stored.scopes)
