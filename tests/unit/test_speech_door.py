"""POST /v1/audio/speech answers the door's refusals (producers.auth) in OpenAI's shape, each with its own
message and headers."""

from __future__ import annotations

import pytest

from producers.api_keys import NewKey, StoredKey, new_key
from producers.auth import KeyBook
from tests.support.api_fakes import Log, Reader, client, deps

pytestmark = pytest.mark.unit

SPEECH = {"model": "tts-1", "input": "Hello there.", "voice": "alloy"}


class Keys:
    def __init__(self) -> None:
        self.rows: dict[str, StoredKey] = {}

    def issue(self, *scopes: str) -> NewKey:
        key = new_key()
        self.rows[key.key_id] = StoredKey(key.key_id, "acme", frozenset(scopes), key.secret_sha256, None, None)
        return key

    async def api_key(self, key_id: str) -> StoredKey | None:
        return self.rows.get(key_id)


async def test_regression_the_doors_refusals_of_a_speech_request_said_its_body_was_not_valid_json():
    """Found reading the fuzz campaign's keyed answers: the route's handler of Litestar's HTTPException took the door's
    401, 403 and 429 for a body it could not read ("the request body is not valid JSON: this route needs an API
    key"), and dropped their WWW-Authenticate and Retry-After."""
    keys = Keys()
    reader_only = keys.issue("read")
    async with client(deps(Reader(), Log(), keys=KeyBook(keys, cache_s=0, failures_per_minute=1))) as http:
        missing = await http.post("/v1/audio/speech", json=SPEECH)
        scope = await http.post(
            "/v1/audio/speech", json=SPEECH, headers={"Authorization": f"Bearer {reader_only.token}"}
        )
        bad = await http.post("/v1/audio/speech", json=SPEECH, headers={"X-API-Key": "nope"})
        refused = await http.post("/v1/audio/speech", json=SPEECH, headers={"X-API-Key": "nope"})
    assert missing.status_code == 401
    assert missing.json()["error"]["message"].startswith("this route needs an API key")
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="voxlog"'
    assert scope.status_code == 403
    assert scope.json()["error"]["message"].startswith(f"API key {reader_only.key_id} lacks the 'submit' scope")
    assert bad.status_code == 401
    assert bad.json()["error"]["message"].startswith("the API key is malformed")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert refused.json()["error"]["message"].startswith("too many failed authentications")
    assert int(refused.headers["Retry-After"]) >= 1
    for answer in (missing, scope, bad, refused):
        assert "not valid JSON" not in answer.text


async def test_a_body_that_is_not_json_still_says_so():
    async with client(deps(Reader(), Log())) as http:
        answer = await http.post("/v1/audio/speech", content=b"{", headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("the request body is not valid JSON")
