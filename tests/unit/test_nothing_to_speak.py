"""Say it now, not later: what the engines would refuse is refused at submission, and inside a document a part
with nothing to speak is a pause, not a failure (issue 25, item 4)."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from contracts import DocumentSubmitted, JobState
from contracts.document_state import document_state
from contracts.request_text import has_words
from producers.app import create_app
from producers.document_split import Document, DocumentError, split_text
from producers.errors import Rejected
from producers.requests import JobRequest, validate
from projections.reads.rows import PartRow
from tests.support.api_fakes import ENGINES, LIMITS, Documents, Log, Reader, deps

NOTHING = ["* * *", "⁂", "...", "—", "🙂🙂🙂", "!?", "\u0301\u0301", "***"]


@pytest.mark.parametrize("text", NOTHING)
def test_regression_a_request_with_nothing_to_speak_was_accepted_then_failed_as_input_rejected(text):
    """Only punctuation, a scene break, emoji or symbols were answered 202, then failed as input_rejected."""
    assert not has_words(text)
    with pytest.raises(Rejected, match="nothing to speak") as refused:
        validate(JobRequest(text=text, voice="af_heart"), LIMITS, ENGINES)
    assert refused.value.status == 422


@pytest.mark.parametrize("text", ["a", "42", "Ω", "日本", "Chapter 4: * * *", "$5"])
def test_a_word_or_a_number_in_any_script_is_something_to_speak(text):
    assert has_words(text)
    validate(JobRequest(text=text, voice="af_heart"), LIMITS, ENGINES)


def parts_of(document: Document) -> list[list[tuple[str, str]]]:
    return [[(p.text, p.break_after) for p in chapter.parts] for chapter in document.chapters]


def test_a_scene_break_is_a_pause_after_the_part_before_it():
    story = "* * *\n\nIt began.\n\n* * *\n\nIt went on.\n\n⁂\n\nChapter 2\n\n🙂🙂\n\nIt ended.\n\n***"
    assert parts_of(split_text(story, "plain")) == [
        [("It began.", "scene"), ("It went on.", "chapter")],
        [("Chapter 2", "scene"), ("It ended.", "chapter")],
    ], "a chapter's end keeps its longer pause; a chapter does not open with one"


def test_regression_a_markdown_rule_read_as_nothing_is_a_scene_break():
    """``* * *`` between paragraphs was dropped without a pause (and as a request, read 'asterisk' thrice)."""
    assert parts_of(split_text("Once.\n\n* * *\n\nTwice.\n\n---\n\nThrice.", "markdown")) == [
        [("Once.", "scene"), ("Twice.", "scene"), ("Thrice.", "chapter")]
    ]


def test_a_document_with_nothing_to_speak_at_all_is_refused():
    with pytest.raises(DocumentError, match="no text to read"):
        split_text("* * *\n\n⁂\n\n🙂", "plain")


def test_regression_one_part_with_nothing_to_speak_failed_the_whole_document():
    """A part refused by the engine for its text failed the document, whose audio then answered 409 forever."""
    spoken = PartRow(job_id=ENGINES and None, fingerprint="a", state=JobState.COMPLETED, total_duration_ms=10,  # type: ignore[arg-type]
                     error_code=None, chars=5)  # fmt: skip
    silent = PartRow(job_id=None, fingerprint="b", state=JobState.FAILED, total_duration_ms=None,  # type: ignore[arg-type]
                     error_code="input_rejected", chars=3)  # fmt: skip
    broken = PartRow(job_id=None, fingerprint="c", state=JobState.FAILED, total_duration_ms=None,  # type: ignore[arg-type]
                     error_code="engine_error", chars=3)  # fmt: skip
    assert document_state([spoken, silent]) == "completed"
    assert document_state([spoken, silent, broken]) == "failed", "a part that failed for another reason fails it"
    assert document_state([silent, None]) == "running"


def test_a_document_with_scene_breaks_records_them_as_pauses_not_parts():
    log = Log()
    text = "# Tale\n\nOnce.\n\n* * *\n\nTwice.\n\n⁂\n\nThrice."
    with TestClient(create_app(deps(Reader(), log, documents=Documents()))) as api:
        answer = api.post("/v1/documents", json={"text": text, "voice": "af_heart"})
    assert answer.status_code == 202, answer.text
    document, *parts = log.published
    assert isinstance(document, DocumentSubmitted)
    assert [p.payload.request.text for p in parts] == ["Tale", "Once.", "Twice.", "Thrice."]
    assert document.payload.breaks == "pbbc"
