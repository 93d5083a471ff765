# ruff: noqa: RUF001
"""The lexicon over HTTP (producers.lexicon_routes) and in submissions (producers.lexicon), on fakes: the admin
scope, what each route hands the operations port, the 422s and the 404, and the entries every speech route's
jobs record and are fingerprinted by, followed within VOXLOG_LEXICON_CACHE_S and kept while PostgreSQL is down."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from contracts import JobQueued
from producers.auth import KeyBook
from producers.lexicon import Lexicon
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import Log, Reader, client, deps
from tests.unit.test_admin_routes import Operations
from tests.unit.test_auth import Keys, bearer

pytestmark = pytest.mark.unit

TOMATO = "təmˈɑːtoʊ"
AT = datetime(2026, 12, 1, tzinfo=UTC)


class LexiconOperations(Operations):
    """The operations port with a lexicon: what was set and removed, and what it lists."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[str, tuple[str, str]] = {}
        self.changes: list[tuple[str, str | None, str]] = []

    async def set_pronunciation(self, word: str, phonemes: str, reason: str) -> None:
        self.changes.append((word, phonemes, reason))
        self.entries[word] = (phonemes, reason)

    async def remove_pronunciation(self, word: str, reason: str) -> bool:
        if self.entries.pop(word, None) is None:
            return False
        self.changes.append((word, None, reason))
        return True

    async def lexicon(self) -> list[dict[str, Any]]:
        return [{"word": w, "phonemes": p, "reason": r, "set_at": AT} for w, (p, r) in sorted(self.entries.items())]


class Rows:
    """The projection's lexicon table; ``down`` makes it unreadable; ``reads`` counts what was read."""

    def __init__(self, entries: dict[str, str] | None = None) -> None:
        self.entries = dict(entries or {})
        self.down = False
        self.reads = 0

    async def lexicon(self) -> dict[str, str]:
        self.reads += 1
        if self.down:
            raise ProjectionUnavailable("cannot read the lexicon from PostgreSQL")
        return dict(self.entries)


def api(keys: Keys, operations: Operations, **fields: Any):
    return client(
        deps(Reader(), fields.pop("log", Log()), keys=KeyBook(keys, cache_s=0), operations=operations, **fields)
    )


async def test_the_lexicon_routes_need_the_admin_scope():
    keys, operations = Keys(), LexiconOperations()
    submitter = keys.issue("acme", "submit", "read", "operator")
    async with api(keys, operations) as http:
        answers = [
            await http.get("/v1/lexicon", headers=bearer(submitter)),
            await http.put("/v1/lexicon/tomato", json={"phonemes": TOMATO}, headers=bearer(submitter)),
            await http.delete("/v1/lexicon/tomato", headers=bearer(submitter)),
            await http.put("/v1/lexicon/tomato", json={"phonemes": TOMATO}),
        ]
    assert [a.status_code for a in answers] == [403, 403, 403, 401]
    assert "admin" in answers[1].json()["detail"]
    assert operations.changes == []


async def test_an_admin_sets_lists_and_removes_a_word_each_change_an_event_naming_who_asked():
    keys, operations = Keys(), LexiconOperations()
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        put = await http.put(
            "/v1/lexicon/Tomato", json={"phonemes": f" {TOMATO} ", "reason": "house style"}, headers=bearer(admin)
        )
        again = await http.put("/v1/lexicon/basil", json={"phonemes": "bˈæzəl"}, headers=bearer(admin))
        listed = await http.get("/v1/lexicon", headers=bearer(admin))
        removed = await http.delete("/v1/lexicon/TOMATO", headers=bearer(admin))
        unknown = await http.delete("/v1/lexicon/tomato", headers=bearer(admin))
    assert (put.status_code, again.status_code, removed.status_code) == (202, 202, 202)
    assert put.json()["word"] == "tomato"
    assert put.json()["phonemes"] == TOMATO
    assert [e["word"] for e in listed.json()["entries"]] == ["basil", "tomato"]
    assert unknown.status_code == 404
    assert "no entry for 'tomato'" in unknown.json()["detail"]
    assert operations.changes == [
        ("tomato", TOMATO, "house style"),
        ("basil", "bˈæzəl", f"set over HTTP by key {admin.key_id}"),
        ("tomato", None, f"removed over HTTP by key {admin.key_id}"),
    ]


@pytest.mark.parametrize(
    ("word", "body", "message"),
    [
        ("tomato", {"phonemes": "tə3mato"}, "the pronunciation of 'tomato' has '3', not in the model's phonemes"),
        ("tomato", {"phonemes": ""}, "needs 1 to 500 phonemes"),
        ("tomato!", {"phonemes": TOMATO}, "'tomato!' is not a word"),
    ],
)
async def test_a_bad_entry_is_a_422_naming_the_word_and_nothing_is_recorded(word, body, message):
    keys, operations = Keys(), LexiconOperations()
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        answer = await http.put(f"/v1/lexicon/{word}", json=body, headers=bearer(admin))
    assert answer.status_code == 422
    assert message in answer.json()["detail"]
    assert operations.changes == []


async def test_every_speech_route_records_the_lexicons_words_its_text_says_and_its_own_win():
    keys, operations, log = Keys(), LexiconOperations(), Log()
    user = keys.issue("acme", "submit", "read")
    rows = Rows({"tomato": TOMATO, "basil": "bˈæzəl"})
    async with api(keys, operations, log=log, lexicon=Lexicon(rows, cache_s=60)) as http:
        job = await http.post(
            "/v1/jobs", json={"text": "The Tomato is red.", "voice": "af_heart"}, headers=bearer(user)
        )
        own = await http.post(
            "/v1/jobs",
            json={"text": "Tomato and basil.", "voice": "af_heart", "pronunciations": {"TOMATO": "təmˈAtO"}},
            headers=bearer(user),
        )
        batch = await http.post(
            "/v1/batches", json={"requests": [{"text": "No herbs.", "voice": "af_heart"}]}, headers=bearer(user)
        )
        bad = await http.post(
            "/v1/jobs",
            json={"text": "Tomato.", "voice": "af_heart", "pronunciations": {"tomato": "x3"}},
            headers=bearer(user),
        )
    assert (job.status_code, own.status_code, batch.status_code) == (202, 202, 202)
    queued = [e for e in log.published if isinstance(e, JobQueued)]
    assert [e.payload.request.pronunciations for e in queued] == [
        {"tomato": TOMATO},
        {"basil": "bˈæzəl", "tomato": "təmˈAtO"},
        {},
    ]
    assert [e.fingerprint for e in queued] == [e.payload.request.fingerprint() for e in queued]
    assert bad.status_code == 422
    assert "the pronunciation of 'tomato' has '3'" in bad.json()["detail"]
    assert rows.reads == 1, "read once within VOXLOG_LEXICON_CACHE_S"


async def test_the_lexicon_is_read_again_after_its_cache_time_and_the_last_read_kept_while_postgres_is_down():
    rows = Rows({"tomato": TOMATO})
    lexicon = Lexicon(rows, cache_s=0)
    assert await lexicon.entries() == {"tomato": TOMATO}
    rows.entries = {"basil": "bˈæzəl"}
    assert await lexicon.entries() == {"basil": "bˈæzəl"}
    rows.down = True
    assert await lexicon.entries() == {"basil": "bˈæzəl"}
    never = Rows()
    never.down = True
    assert await Lexicon(never, cache_s=0).entries() == {}
