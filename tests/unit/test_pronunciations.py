# ruff: noqa: RUF001
"""Pronunciations (contracts.pronunciations): the request field and the server's lexicon, from the events and
their upcasters through the fingerprint, the API's resolution and checks, to the worker's G2P, where the given
phonemes replace the word's."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest

from contracts import (
    DocumentSubmitted,
    JobQueued,
    LexiconEntryRemoved,
    LexiconEntryRemovedPayload,
    LexiconEntrySet,
    LexiconEntrySetPayload,
    decode_event,
    decode_node_event,
    encode_event,
    record_key,
)
from contracts.events import CURRENT_SCHEMA_VERSIONS
from contracts.pronunciations import (
    MAX_REQUEST_ENTRIES,
    PronunciationError,
    applied,
    checked_map,
    checked_word,
    spoken_pieces,
)
from contracts.ssml import Phonemes, Text
from foundation.kafka import RecordPosition
from producers.errors import Rejected
from producers.requests import JobRequest, validate
from projections.reducer import Projection
from tests.support.api_fakes import ENGINES, LIMITS
from tests.support.events import PRODUCER, T0, one_of_each
from tests.support.job_logs import _Builder
from tests.unit.test_reducer import document as make_document
from tts_node.engine import EngineInfo, Segment
from tts_node.g2p import Phonemizer
from tts_node.model_files import load_vocab
from tts_node.segmenter import MAX_TOKENS
from tts_node.ssml import request_segments

pytestmark = pytest.mark.unit

TOMATO = "təmˈɑːtoʊ"


def entry_set(word: str, phonemes: str, seconds: int = 0, reason: str = "") -> LexiconEntrySet:
    payload = LexiconEntrySetPayload(word=word, phonemes=phonemes, reason=reason)
    return LexiconEntrySet(
        event_id=uuid.uuid4(), occurred_at=T0 + timedelta(seconds=seconds), producer=PRODUCER, payload=payload
    )


def entry_removed(word: str, seconds: int = 0) -> LexiconEntryRemoved:
    payload = LexiconEntryRemovedPayload(word=word, reason="wrong")
    return LexiconEntryRemoved(
        event_id=uuid.uuid4(), occurred_at=T0 + timedelta(seconds=seconds), producer=PRODUCER, payload=payload
    )


# Events and upcasters


def test_lexicon_events_round_trip_and_are_keyed_by_their_word_so_compaction_keeps_its_last():
    added, removed = entry_set("tomato", TOMATO, reason="house style"), entry_removed("tomato")
    assert decode_node_event(encode_event(added)) == added
    assert decode_node_event(encode_event(removed)) == removed
    assert record_key(added) == record_key(removed) == b"lexicon/tomato"


def test_a_version_6_job_queued_is_read_as_version_7_without_pronunciations_and_keeps_its_fingerprint():
    event = _Builder(uuid.UUID(int=29), request_text="The tomato is red.").queued()
    raw = encode_event(event).replace(b'"schema_version":7', b'"schema_version":6')
    old = raw.replace(b',"pronunciations":{}', b"")
    assert b"pronunciations" not in old
    read = decode_event(old)
    assert isinstance(read, JobQueued)
    assert (read.schema_version, read.payload.request.pronunciations) == (CURRENT_SCHEMA_VERSIONS["JobQueued"], {})
    assert read == event
    assert read.payload.request.fingerprint() == event.fingerprint


def test_a_version_4_document_is_read_as_version_5_without_pronunciations():
    document = make_document(uuid.UUID(int=5), "A book")
    raw = json.loads(encode_event(document))
    raw["schema_version"] = 4
    del raw["payload"]["request"]["pronunciations"]
    read = decode_node_event(json.dumps(raw).encode())
    assert isinstance(read, DocumentSubmitted)
    assert (read.schema_version, read.payload.request.pronunciations) == (5, {})
    assert read == document


# The fingerprint


def test_pronunciations_are_fingerprinted_only_when_set_and_in_one_canonical_form():
    request = one_of_each()[0].payload.request
    assert request.pronunciations == {}
    assert request.model_copy(update={"pronunciations": {}}).fingerprint() == request.fingerprint()
    said = request.model_validate({**request.model_dump(), "pronunciations": {"tomato": TOMATO, "basil": "bˈæzəl"}})
    again = request.model_validate({**request.model_dump(), "pronunciations": {"basil": "bˈæzəl", "tomato": TOMATO}})
    assert said.fingerprint() != request.fingerprint()
    assert said.fingerprint() == again.fingerprint()
    assert list(said.pronunciations) == ["basil", "tomato"], "recorded sorted: one spelling of one map"
    other = request.model_validate({**request.model_dump(), "pronunciations": {"tomato": "təmˈAtO"}})
    assert other.fingerprint() not in (said.fingerprint(), request.fingerprint())


# The request's own map: canonical form and refusals


def test_a_requests_own_map_is_casefolded_sorted_and_its_phonemes_folded():
    assert checked_map({"Tomato": f"  {TOMATO} ", "Don’t": "dˈOnt", "X-ray": "ˈɛksɹA"}) == {
        "don't": "dˈOnt",
        "tomato": TOMATO,
        "x-ray": "ˈɛksɹA",
    }


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"tomato": "tə3mato"}, "the pronunciation of 'tomato' has '3', not in the model's phonemes"),
        ({"tomato": "  "}, "the pronunciation of 'tomato' needs 1 to 500 phonemes"),
        ({"two words": "tˈuː"}, "'two words' is not a word"),
        ({"-dash": "dˈæʃ"}, "'-dash' is not a word"),
        ({"a" * 65: "ɐ"}, "is not a word"),
        ({"Tomato": TOMATO, "TOMATO": TOMATO}, "gives 'TOMATO' twice"),
        ({f"w{i}": "ɐ" for i in range(MAX_REQUEST_ENTRIES + 1)}, f"the limit is {MAX_REQUEST_ENTRIES}"),
    ],
)
def test_a_bad_pronunciation_is_refused_naming_the_word_and_what_to_fix(given, message):
    with pytest.raises(PronunciationError, match=message):
        checked_map(given)
    with pytest.raises(Rejected, match=message) as refused:
        validate(JobRequest(text="The tomato.", voice="af_heart", pronunciations=given), LIMITS, ENGINES)
    assert (refused.value.status, refused.value.param) == (422, "pronunciations")


def test_a_lexicon_word_is_checked_as_a_requests_word():
    assert checked_word(" Tomato ") == "tomato"
    with pytest.raises(PronunciationError, match="not a word"):
        checked_word("tomato!")


# Resolution: whole words, any case, the request's own winning, only what the text says


def test_resolution_matches_whole_words_in_any_case_and_the_requests_own_entries_win():
    lexicon = {"tomato": TOMATO, "basil": "bˈæzəl", "red": "ɹˈɛd", "potato": "pətˈAtO"}
    own = {"red": "ɹˈɛːd", "unsaid": "ʌnsˈɛd"}
    found = applied(["TOMATO and Basil, tomatoes and potato-salad are red."], own, lexicon)
    assert found == {"basil": "bˈæzəl", "red": "ɹˈɛːd", "tomato": TOMATO}, (
        "tomatoes and potato-salad are other words; an entry for a word the text does not say is not kept"
    )


def test_validation_adds_the_lexicons_words_the_text_says_so_only_those_texts_change_fingerprint():
    lexicon = {"tomato": TOMATO}
    said = validate(JobRequest(text="The Tomato is red.", voice="af_heart"), LIMITS, ENGINES, lexicon)
    unsaid = validate(JobRequest(text="The sky is blue.", voice="af_heart"), LIMITS, ENGINES, lexicon)
    plain = validate(JobRequest(text="The Tomato is red.", voice="af_heart"), LIMITS, ENGINES)
    assert said.pronunciations == {"tomato": TOMATO}
    assert said.fingerprint() != plain.fingerprint()
    skyless = validate(JobRequest(text="The sky is blue.", voice="af_heart"), LIMITS, ENGINES)
    assert (unsaid.pronunciations, unsaid.fingerprint()) == ({}, skyless.fingerprint())


def test_an_ssml_request_is_matched_in_its_text_pieces_not_in_its_phonemes_or_markup():
    text = "<speak><phoneme ph='bˈæzəl'>basil</phoneme> and tomato <break time='1s'/>phoneme</speak>"
    request = validate(
        JobRequest(text=text, voice="af_heart"),
        LIMITS,
        ENGINES,
        {"basil": "bˈeɪzəl", "tomato": TOMATO, "break": "bɹˈAk", "speak": "spˈiːk", "phoneme": "fˈOniːm"},
    )
    assert request.input_format == "ssml"
    assert request.pronunciations == {"phoneme": "fˈOniːm", "tomato": TOMATO}


# The worker: each word a <phoneme> piece, the rest as written


def test_spoken_pieces_keep_every_character_and_make_each_word_a_phoneme_piece():
    pieces = spoken_pieces([Text("Tomato, tomato! tomatoes.", 1.5)], {"tomato": TOMATO})
    assert pieces == [
        Phonemes(TOMATO, "Tomato", 1.5),
        Text(", ", 1.5),
        Phonemes(TOMATO, "tomato", 1.5),
        Text("! tomatoes.", 1.5),
    ]


class _G2POnly:
    """An engine that segments with the real espeak G2P and Kokoro's vocabulary, and synthesizes nothing."""

    def __init__(self) -> None:
        self.phonemizer = Phonemizer(load_vocab())
        self.info = EngineInfo("g2p", "m", 24000, ("af_heart",), ("en-us",), "cpu")

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        return self.phonemizer.segment(text, lang, MAX_TOKENS, normalize=normalize)

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        return self.phonemizer.phoneme_ids(phonemes)


def test_the_given_phonemes_replace_the_words_g2p_and_the_rest_is_phonemized_as_usual():
    engine, vocab = _G2POnly(), load_vocab()
    text = "The tomato is red."
    g2p = request_segments(engine, text, "en-us")  # type: ignore[arg-type]
    said = request_segments(engine, text, "en-us", pronunciations={"tomato": "tˈOmAtO"})  # type: ignore[arg-type]
    assert len(g2p) == 1
    assert [s.text for s in said] == ["The", "tomato", "is red."], "spans exclude the whitespace around them"
    assert [(s.index, s.start, s.end) for s in said] == [(0, 0, 3), (1, 4, 10), (2, 11, 18)]
    assert [text[s.start : s.end] for s in said] == ["The", "tomato", "is red."], "spans in the text as written"
    assert said[1].token_ids == tuple(vocab[c] for c in "tˈOmAtO")
    assert said[1].spoken == "tomato", "its caption is the word as written"
    assert said[0].token_ids == engine.segment("The ", "en-us")[0].token_ids
    assert said[2].token_ids == engine.segment(" is red.", "en-us")[0].token_ids
    espeak_tomato = engine.segment("tomato", "en-us")[0].token_ids
    assert espeak_tomato != said[1].token_ids
    assert request_segments(engine, text, "en-us", pronunciations={}) == g2p  # type: ignore[arg-type]


# The projection: one fold of set and remove, by the record's clock


def test_the_lexicon_folds_sets_and_removals_and_an_older_record_never_replaces_a_newer():
    projection = Projection(timedelta(hours=1))
    at = iter(range(100))

    def apply(event: LexiconEntrySet | LexiconEntryRemoved) -> None:
        projection.apply_node(event, RecordPosition("voxlog.nodes", 0, next(at)))

    apply(entry_set("tomato", TOMATO, seconds=1))
    assert projection.lexicon["tomato"].phonemes == TOMATO
    apply(entry_set("tomato", "təmˈAtO", seconds=0))  # an older record, read later: changes nothing
    assert projection.lexicon["tomato"].phonemes == TOMATO
    removal = entry_removed("tomato", seconds=2)
    apply(removal)
    assert (projection.lexicon["tomato"].phonemes, projection.lexicon["tomato"].last_event_id) == (
        None,
        removal.event_id,
    )
    apply(entry_set("tomato", TOMATO, seconds=1))  # older than the removal: the word stays removed
    assert projection.lexicon["tomato"].phonemes is None
    apply(entry_set("tomato", "təmˈAtO", seconds=3, reason="house style"))
    row = projection.lexicon["tomato"]
    assert (row.phonemes, row.reason, row.set_at) == ("təmˈAtO", "house style", T0 + timedelta(seconds=3))
    assert list(projection.rows("lexicon")) == [row]


# The audit


def test_the_audit_shows_the_pronunciations_a_job_is_said_with_on_its_queued_line():
    from projections.audit import history_of
    from tests.unit.test_audit import logged
    from voxlog.audit_cli import job_report

    job = _Builder(uuid.UUID(int=12), request_text="The tomato and basil.")
    queued = job.queued()
    request = queued.payload.request.model_copy(update={"pronunciations": {"tomato": TOMATO, "basil": "bˈæzəl"}})
    event = queued.model_copy(update={"payload": queued.payload.model_copy(update={"request": request})})
    [line] = [line for line in job_report(history_of(job.job_id, logged([event]))) if "JobQueued" in line]
    assert line.endswith(f"applied -> queued, pronunciations (basil /bˈæzəl/, tomato /{TOMATO}/)")
    [plain] = [line for line in job_report(history_of(job.job_id, logged([queued]))) if "JobQueued" in line]
    assert "pronunciations" not in plain
