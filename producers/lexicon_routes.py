"""The server's lexicon over HTTP, under the admin scope: ``PUT``/``DELETE /v1/lexicon/{word}``, ``GET /v1/lexicon``.

They do what ``voxlog lexicon add|remove|list`` does (the same code, through :class:`producers.ports.Operations`):
an entry set or removed is a ``LexiconEntrySet`` or ``LexiconEntryRemoved`` event on the control topic, which every
API follows once the projector applies it (within a second: ``voxlog.composition.api.LEXICON_CACHE_S``), so a change
is audited and replayed like any other. The word and its phonemes are checked by the rule requests' own
pronunciations follow (:mod:`contracts.pronunciations`): a 422 names the word and what to fix.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from litestar import Response, delete, get, put
from litestar.params import Body, FromPath
from pydantic import ConfigDict, Field

from contracts.pronunciations import PronunciationError, checked_phonemes, checked_word
from producers.admin_routes import who_asked, wired
from producers.api_keys import Principal
from producers.auth import ADMIN
from producers.deps import Injected
from producers.errors import Rejected
from producers.http_errors import responses
from producers.ports import Operations
from producers.views import View

MAX_REASON_CHARS = 500
FOLLOWED = "recorded on the log: every API follows once the projector applies it (GET /v1/lexicon to see)"


class LexiconEntryBody(View):
    model_config = ConfigDict(frozen=True, extra="forbid")

    phonemes: str = Field(
        description="How the word is said, in Kokoro's phoneme alphabet (the one SSML's <phoneme ph> takes)."
    )
    reason: str = Field("", max_length=MAX_REASON_CHARS, description="Recorded with the entry; default: who asked.")


class LexiconEntryView(View):
    word: str = Field(description="The word, casefolded: it is matched whole and case-insensitively.")
    phonemes: str
    reason: str
    set_at: datetime


class LexiconView(View):
    entries: list[LexiconEntryView]


class LexiconChange(View):
    word: str
    phonemes: str | None = Field(description="The entry's phonemes; null: the word was removed.")
    reason: str
    detail: str


def _word(word: str) -> str:
    try:
        return checked_word(word)
    except PronunciationError as exc:
        raise Rejected(str(exc), param="word") from exc


@get("/v1/lexicon", summary="The server's lexicon, as projected", guards=ADMIN, responses=responses(401, 403, 503))
async def get_lexicon(operations: Injected[Operations | None]) -> LexiconView:
    entries = await wired(operations).lexicon()
    return LexiconView(entries=[LexiconEntryView.model_validate(entry) for entry in entries])


@put(
    "/v1/lexicon/{word:str}",
    summary="Set a word's pronunciation for every request that says it (a LexiconEntrySet event)",
    guards=ADMIN,
    status_code=202,
    responses=responses(400, 401, 403, 422, 503),
)
async def set_word(
    operations: Injected[Operations | None],
    principal: Injected[Principal],
    word: FromPath[str],
    data: Annotated[LexiconEntryBody, Body()],
) -> Response[LexiconChange]:
    key = _word(word)
    try:
        phonemes = checked_phonemes(word, data.phonemes)
    except PronunciationError as exc:
        raise Rejected(str(exc), param="phonemes") from exc
    reason = data.reason.strip() or who_asked(principal)
    await wired(operations).set_pronunciation(key, phonemes, reason)
    return Response(LexiconChange(word=key, phonemes=phonemes, reason=reason, detail=FOLLOWED), status_code=202)


@delete(
    "/v1/lexicon/{word:str}",
    summary="Remove a word from the lexicon (a LexiconEntryRemoved event); 404 when it has no entry",
    guards=ADMIN,
    status_code=202,
    responses=responses(400, 401, 403, 404, 422, 503),
)
async def remove_word(
    operations: Injected[Operations | None], principal: Injected[Principal], word: FromPath[str]
) -> Response[LexiconChange]:
    key = _word(word)
    reason = f"removed over HTTP by key {principal.key_id}" if principal.key_id else "removed over HTTP (auth off)"
    if not await wired(operations).remove_pronunciation(key, reason):
        raise Rejected(f"the lexicon has no entry for {key!r} (GET /v1/lexicon lists them)", 404)
    return Response(LexiconChange(word=key, phonemes=None, reason=reason, detail=FOLLOWED), status_code=202)


ROUTES = [get_lexicon, set_word, remove_word]
