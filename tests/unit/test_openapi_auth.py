"""The OpenAPI document says what the door (producers.auth) does: which routes need a key, and that each of
those may be answered 401, 403 and 429 before the route runs."""

from __future__ import annotations

import re

import pytest

from producers.auth import PUBLIC_PATHS
from tests.support.api_fakes import Reader, client, deps

pytestmark = pytest.mark.unit


async def _operations() -> dict[tuple[str, str], dict]:
    async with client(deps(Reader())) as http:
        document = (await http.get("/schema/openapi.json")).json()
    return {(method, path): op for path, methods in document["paths"].items() for method, op in methods.items()}


def _public(path: str) -> bool:
    return any(re.search(pattern, path) for pattern in PUBLIC_PATHS)


async def test_regression_keyed_routes_did_not_document_the_doors_answers():
    """Found by the fuzz campaign's keyed pass: DELETE /v1/documents/{id} listed neither 401 nor 403, and every
    keyed route but the submissions left out 429, which the door answers past a key's rate (or an address's
    failed authentications): schemathesis saw undocumented statuses."""
    keyed = {key: op for key, op in (await _operations()).items() if not _public(key[1])}
    assert ("delete", "/v1/documents/{document_id}") in keyed
    for (method, path), operation in keyed.items():
        assert {"401", "403", "429"} <= set(operation["responses"]), f"{method.upper()} {path}"
        assert "security" not in operation, f"{method.upper()} {path}: the document's own (a key) applies"


async def test_regression_health_and_readiness_were_documented_as_needing_a_key():
    """Found by the fuzz campaign's keyed pass (schemathesis' ignored_auth check): the document's global
    security applied to /healthz and /readyz, which take no key."""
    public = {key: op for key, op in (await _operations()).items() if _public(key[1])}
    assert set(public) == {("get", "/healthz"), ("get", "/readyz")}
    for operation in public.values():
        assert operation["security"] == [{}]
