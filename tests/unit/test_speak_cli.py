"""`voxlog speak`: the client against a scripted API (httpx.MockTransport); the real API is tested elsewhere."""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from producers.views import DocumentView
from voxlog import speak_cli
from voxlog.client import ApiError, Client, RetryPolicy
from voxlog.errors import VoxlogError
from voxlog.speak_cli import SpeakInterrupted, SpeakOptions, default_out, idempotency_key, speak
from voxlog.speak_follow import ProgressBar, chapter_file_name, progress_line, slugify

pytestmark = pytest.mark.unit

DOC_ID = "00000000-0000-4000-8000-0000000000d1"
CHAPTERS = [("Prologue", 1), ("L'été à Paris", 2)]
FAST = RetryPolicy(attempts=4, budget_s=5.0, base_s=0.001, max_s=0.002)
TOC = {
    "document_id": DOC_ID,
    "title": "My Book",
    "duration_ms": 3000,
    "chapters": [
        {"index": 0, "title": "Prologue", "start_ms": 0, "duration_ms": 1000, "parts": 1,
         "audio": f"/v1/documents/{DOC_ID}/chapters/0/audio"},
        {"index": 1, "title": "L'été à Paris", "start_ms": 1000, "duration_ms": 2000, "parts": 2,
         "audio": f"/v1/documents/{DOC_ID}/chapters/1/audio"},
    ],
}  # fmt: skip
LINKS = {
    "self": f"/v1/documents/{DOC_ID}",
    "audio": f"/v1/documents/{DOC_ID}/audio",
    "toc": f"/v1/documents/{DOC_ID}/toc",
}


def view(
    state: str,
    *,
    total: int = 3,
    completed: int = 0,
    failed: int = 0,
    cancelled: int = 0,
    audio_seconds: float = 0.0,
    estimated_finish: str | None = None,
    chapters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A DocumentView's body, whole (the client reads it typed)."""
    request = {
        "voice": "af_heart", "speed": 1.0, "lang": "en-us", "engine": "kokoro-onnx", "model_version": "m1",
        "format": "wav", "sample_rate": 24000, "normalize": True, "pronunciations": {},
    }  # fmt: skip
    return {
        "document_id": DOC_ID, "title": "My Book", "state": state, "submitted_at": "2026-12-04T00:00:00Z",
        "priority": "interactive", "request": request, "chars": 1234,
        "parts": {"total": total, "completed": completed, "failed": failed, "cancelled": cancelled},
        "audio_seconds": audio_seconds, "estimated_finish": estimated_finish, "chapters": chapters or [],
        "links": LINKS,
    }  # fmt: skip


def status(state: str, done: list[int], *, failed: int = 0, cancelled: int = 0) -> dict[str, Any]:
    """The document's status with ``done[i]`` parts completed in chapter i."""
    chapters = [
        {
            "index": i,
            "title": title,
            "parts": parts,
            "completed": done[i],
            "audio_seconds": 1.5 * done[i],
            "links": {"audio": f"/v1/documents/{DOC_ID}/chapters/{i}/audio"},
        }
        for i, (title, parts) in enumerate(CHAPTERS)
    ]
    finish = None if state == "completed" else "2030-01-01T12:00:00Z"
    return view(
        state, completed=sum(done), failed=failed, cancelled=cancelled, audio_seconds=1.5 * sum(done),
        estimated_finish=finish, chapters=chapters,
    )  # fmt: skip


ACCEPTED = {
    "document_id": DOC_ID,
    "title": "My Book",
    "parts": 3,
    "chars": 1234,
    "chapters": [{"index": i, "title": t, "parts": p} for i, (t, p) in enumerate(CHAPTERS)],
    "links": LINKS,
}


class FakeApi:
    """Plays the documents API: answers the submission, then each status read from a script (the last
    one repeats), serves chapter audio only once the chapter is complete."""

    def __init__(self, statuses: list[dict[str, Any]], *, submit_status: int = 202, submit_body: Any = None) -> None:
        self.statuses = statuses
        self.polls = 0
        self.submit_status = submit_status
        self.submit_body = submit_body
        self.requests: list[httpx.Request] = []
        self.current: dict[str, Any] | None = None

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.method == "GET" and path == "/v1/voices":
            return httpx.Response(200, json={"engines": [{"voices": ["af_heart", "am_adam"]}]})
        if request.method == "POST" and path == "/v1/documents":
            return httpx.Response(self.submit_status, json=self.submit_body or ACCEPTED)
        if path == f"/v1/documents/{DOC_ID}":
            self.current = self.statuses[min(self.polls, len(self.statuses) - 1)]
            self.polls += 1
            return httpx.Response(200, json=self.current)
        chapter = re.fullmatch(rf"/v1/documents/{DOC_ID}/chapters/(\d+)/audio", path)
        if chapter:
            index = int(chapter.group(1))
            ch = self.current["chapters"][index] if self.current else None
            if ch is None or ch["completed"] < ch["parts"]:
                return httpx.Response(409, json={"detail": "chapter not completed"})
            return httpx.Response(200, content=f"audio-{index}".encode())
        if path == f"/v1/documents/{DOC_ID}/audio":
            if not self.current or self.current["state"] != "completed":
                return httpx.Response(409, json={"detail": "not completed"})
            return httpx.Response(200, content=b"whole-book")
        if path == f"/v1/documents/{DOC_ID}/toc":
            return httpx.Response(200, json=TOC)
        captions = re.fullmatch(rf"/v1/documents/{DOC_ID}(/chapters/\d+)?/captions", path)
        if captions:
            return httpx.Response(200, content=f"{request.url.params['format']} of {captions.group(1)}".encode())
        return httpx.Response(404, json={"detail": f"no route {request.method} {path}"})

    def client(self, handler: Any = None, retry: RetryPolicy = FAST) -> Client:
        return Client("http://api.test", retry=retry, transport=httpx.MockTransport(handler or self.handler))

    def submissions(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST"]

    def reads(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path == f"/v1/documents/{DOC_ID}"]


def parse_multipart(request: httpx.Request) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """The form fields and the files (name -> (filename, bytes)) of a multipart request."""
    boundary = re.search(r"boundary=([^;]+)", request.headers["content-type"]).group(1).encode()
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    for chunk in request.content.split(b"--" + boundary)[1:-1]:
        head, _, body = chunk.removeprefix(b"\r\n").removesuffix(b"\r\n").partition(b"\r\n\r\n")
        disposition = head.decode().split("\r\n")[0]
        name = re.search(r'name="([^"]*)"', disposition).group(1)
        filename = re.search(r'filename="([^"]*)"', disposition)
        if filename:
            files[name] = (filename.group(1), body)
        else:
            fields[name] = body.decode()
    return fields, files


@pytest.fixture
def book(tmp_path: Path) -> Path:
    path = tmp_path / "my book.md"
    path.write_text("# Prologue\n\nOnce.\n\n# L'été à Paris\n\nTwice.\n", encoding="utf-8")
    return path


def completed_script() -> list[dict[str, Any]]:
    return [
        status("queued", [0, 0]),
        status("running", [0, 0]),
        status("running", [1, 0]),
        status("running", [1, 1]),
        status("completed", [1, 2]),
    ]


def test_the_submission_carries_the_file_and_the_fields_given(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    options = SpeakOptions(voice="am_adam", format="mp3", speed=1.25, lang="en-gb", title="Another")
    with api.client() as client:
        speak(client, book, options, tmp_path / "out", poll_s=0)

    (request,) = api.submissions()
    fields, files = parse_multipart(request)
    assert files == {"file": ("my book.md", book.read_bytes())}
    assert fields == {"voice": "am_adam", "format": "mp3", "speed": "1.25", "lang": "en-gb", "title": "Another"}
    assert re.fullmatch(r"[0-9a-f]{64}", request.headers["idempotency-key"])


def test_the_default_voice_is_the_first_announced_and_unset_options_are_not_sent(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    with api.client() as client:
        speak(client, book, SpeakOptions(), tmp_path / "out", poll_s=0)

    fields, _ = parse_multipart(api.submissions()[0])
    assert fields == {"voice": "af_heart", "format": "wav"}


def test_the_idempotency_key_is_stable_for_the_same_input_and_differs_for_other_options(book: Path, tmp_path: Path):
    def key(options: SpeakOptions, path: Path = book) -> str:
        api = FakeApi(completed_script())
        with api.client() as client:
            speak(client, path, options, tmp_path / "out", poll_s=0)
        return api.submissions()[0].headers["idempotency-key"]

    base = SpeakOptions(voice="af_heart")
    assert key(base) == key(base) == key(SpeakOptions())  # the default voice resolves to the same one
    others = {
        key(SpeakOptions(voice="am_adam")),
        key(SpeakOptions(voice="af_heart", format="mp3")),
        key(SpeakOptions(voice="af_heart", speed=1.1)),
        key(SpeakOptions(voice="af_heart", lang="en-gb")),
        key(SpeakOptions(voice="af_heart", title="T")),
    }
    assert len(others) == 5
    assert key(base) not in others
    changed = book.with_name("other.md")
    changed.write_bytes(book.read_bytes() + b"more")
    assert key(base, changed) != key(base)
    # --whole and --out only change what the client downloads, not the document
    assert key(SpeakOptions(voice="af_heart", whole=True)) == key(base)


def test_the_idempotency_key_separates_the_file_from_the_options():
    assert idempotency_key(b"ab", "f.txt", {"voice": "v"}) != idempotency_key(b"a", "f.txt", {"voice": "v"})
    assert idempotency_key(b"ab", "f.txt", {"voice": "v"}) != idempotency_key(b"ab", "f.md", {"voice": "v"})
    assert idempotency_key(b"ab", "f.txt", {"voice": "v"}) == idempotency_key(b"ab", "f.txt", {"voice": "v"})


def test_progress_goes_from_nothing_to_done_one_line_per_completed_count(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    stream = io.StringIO()
    with api.client() as client:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", ProgressBar(stream, live=False), poll_s=0)

    lines = stream.getvalue().splitlines()
    assert lines[0].startswith(f"submitted document {DOC_ID}: 'My Book', 2 chapters, 3 parts")
    counts = [re.search(r"(\d+)/3 parts", line).group(1) for line in lines[1:]]
    assert counts == ["0", "1", "2", "3"]  # the repeated 0/3 poll printed no second line
    assert lines[1].startswith("[" + "-" * 24 + "] 0/3 parts  0s of audio  ETA ")
    assert lines[-1] == "[" + "#" * 24 + "] 3/3 parts  4s of audio"


def test_a_live_bar_redraws_one_line_and_ends_it(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    stream = io.StringIO()
    bar = ProgressBar(stream, live=True, width=10)
    with api.client() as client:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", bar, poll_s=0)
    bar.close()

    text = stream.getvalue()
    submitted, drawn = text.split("\n", 1)
    assert submitted.startswith("submitted document")
    assert drawn.count("\r") == api.polls
    assert drawn.endswith("\r[##########] 3/3 parts  4s of audio" + " " * len("  ETA 2030-01-01 12:00") + "\n")


def test_progress_line_shows_audio_time_eta_and_failures():
    line = progress_line(
        DocumentView.model_validate(view("running", total=80, completed=12, failed=2, audio_seconds=200.4)), width=10
    )
    assert line == "[#---------] 12/80 parts  3m20s of audio  2 failed"
    long = progress_line(DocumentView.model_validate(view("running", total=0, audio_seconds=3723)))
    assert "1h02m03s of audio" in long
    eta = progress_line(
        DocumentView.model_validate(view("running", total=2, completed=1, estimated_finish="2999-05-02T14:05:10Z"))
    )
    assert re.search(r"ETA 2999-05-0\d \d\d:\d\d$", eta)  # another day: with its date (local time)
    ended = progress_line(DocumentView.model_validate(view("failed", estimated_finish="2999-05-02T14:05:10Z")))
    assert "ETA" not in ended


def test_chapters_toc_and_whole_are_written_with_their_names_and_bytes(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    out = tmp_path / "out"
    with api.client() as client:
        paths = speak(client, book, SpeakOptions(voice="v", format="pcm", whole=True), out, poll_s=0)

    assert paths == [out / "01-prologue.raw", out / "02-l-ete-a-paris.raw", out / "toc.json", out / "my-book.raw"]
    assert (out / "01-prologue.raw").read_bytes() == b"audio-0"
    assert (out / "02-l-ete-a-paris.raw").read_bytes() == b"audio-1"
    assert json.loads((out / "toc.json").read_text(encoding="utf-8")) == TOC
    assert (out / "my-book.raw").read_bytes() == b"whole-book"
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)  # no .part left over


def test_a_chapter_is_downloaded_as_soon_as_it_completes(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    with api.client() as client:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)

    gets = [r.url.path for r in api.requests if r.method == "GET"]
    first_chapter = gets.index(f"/v1/documents/{DOC_ID}/chapters/0/audio")
    assert gets[:first_chapter].count(f"/v1/documents/{DOC_ID}") == 3  # the poll that saw it complete
    assert gets.count(f"/v1/documents/{DOC_ID}/chapters/0/audio") == 1  # and only once
    assert f"/v1/documents/{DOC_ID}/audio" not in gets  # no --whole


def test_reads_are_held_by_the_api_and_paced_only_when_nothing_changed(
    book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    api = FakeApi([status("running", [0, 0]), status("running", [0, 0]), status("completed", [1, 2])])
    slept: list[float] = []
    monkeypatch.setattr("voxlog.speak_follow.time.sleep", slept.append)
    with api.client() as client:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0.5, timeout_s=3600)
    assert [r.headers.get("prefer") for r in api.reads()] == ["wait=25.0"] * 3
    assert slept == [0.5]  # after the second read, which changed nothing (an API that does not hold reads)


def test_a_chapter_whose_audio_is_not_ready_yet_is_asked_again_after_a_read_not_held(
    book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    api = FakeApi([status("running", [1, 0]), status("running", [1, 1]), status("completed", [1, 2])])
    refused = [httpx.Response(409, json={"detail": "the chapter's audio is not stitched yet"})]
    slept: list[float] = []
    monkeypatch.setattr("voxlog.speak_follow.time.sleep", slept.append)

    def not_yet(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chapters/0/audio") and refused:
            api.requests.append(request)
            return refused.pop()
        return api.handler(request)

    with api.client(not_yet) as client:
        paths = speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0.5, timeout_s=3600)
    assert [r.headers.get("prefer") for r in api.reads()] == ["wait=25.0", None, "wait=25.0"]
    assert slept == [0.5]
    gets = [r.url.path for r in api.requests if r.url.path.endswith("/chapters/0/audio")]
    assert len(gets) == 2
    assert (tmp_path / "out" / "01-prologue.wav").read_bytes() == b"audio-0"
    assert len(paths) == 3


def test_a_document_not_projected_yet_is_read_again(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    unknown = [httpx.Response(404, json={"detail": "no document (a document just submitted appears ...)"})]

    def lagging(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/v1/documents/{DOC_ID}" and unknown:
            api.requests.append(request)
            return unknown.pop()
        return api.handler(request)

    with api.client(lagging) as client:
        paths = speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)
    assert not unknown
    assert len(paths) == 3


def test_a_resumed_submission_is_announced_as_such(book: Path, tmp_path: Path):
    api = FakeApi([status("completed", [1, 2])], submit_status=200)
    stream = io.StringIO()
    with api.client() as client:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", ProgressBar(stream, live=False), poll_s=0)
    assert stream.getvalue().startswith(f"resuming document {DOC_ID}")


@pytest.mark.parametrize("state", ["cancelled", "failed"])
def test_a_document_that_ends_cancelled_or_failed_raises_with_its_counts(book: Path, tmp_path: Path, state: str):
    ended = status(state, [1, 0], failed=1 if state == "failed" else 0, cancelled=2 if state == "cancelled" else 1)
    api = FakeApi([status("running", [1, 0]), ended])
    with api.client() as client, pytest.raises(VoxlogError) as raised:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)

    message = str(raised.value)
    assert f"document {DOC_ID} {state}" in message
    if state == "cancelled":
        assert "1 of 3 parts completed, 0 failed, 2 cancelled" in message
    else:
        assert "1 of 3 parts completed, 1 failed, 1 cancelled" in message


def test_a_refused_submission_raises_with_the_servers_detail(book: Path, tmp_path: Path):
    api = FakeApi([], submit_status=422, submit_body={"detail": "the EPUB has no spine"})
    out = tmp_path / "out"
    with api.client() as client, pytest.raises(VoxlogError, match=r"\(422\): the EPUB has no spine"):
        speak(client, book, SpeakOptions(voice="v"), out, poll_s=0)
    assert not out.exists()


def test_a_missing_file_is_a_voxlog_error(tmp_path: Path):
    api = FakeApi([])
    with api.client() as client, pytest.raises(VoxlogError, match="cannot read"):
        speak(client, tmp_path / "absent.txt", SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)


def test_the_wait_is_bounded(book: Path, tmp_path: Path):
    api = FakeApi([status("running", [0, 0])])
    with api.client() as client, pytest.raises(VoxlogError, match="run the same command again to resume"):
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0, timeout_s=0)


def test_a_passing_outage_is_ridden_out(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    failures = [httpx.Response(503, json={"detail": "projection unavailable"})] * 2 + [httpx.ConnectError("down")]

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/v1/documents/{DOC_ID}" and api.polls == 2 and failures:
            failure = failures.pop()
            if isinstance(failure, Exception):
                raise failure
            return failure
        return api.handler(request)

    with api.client(flaky) as client:
        paths = speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)
    assert not failures
    assert len(paths) == 3


def test_an_outage_that_lasts_gives_up_once_the_retries_are_spent(book: Path, tmp_path: Path):
    api = FakeApi([])

    def down(request: httpx.Request) -> httpx.Response:
        api.requests.append(request)
        if request.method == "POST":
            return httpx.Response(202, json=ACCEPTED)
        return httpx.Response(503, json={"detail": "projection unavailable"})

    with (
        api.client(down) as client,
        pytest.raises(VoxlogError, match=r"\(503\): projection unavailable \(gave up after 4 attempts\)"),
    ):
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)
    assert len(api.reads()) == FAST.attempts


def test_a_submission_answered_503_with_retry_after_is_sent_again_with_the_same_key(
    book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    api = FakeApi(completed_script())
    refusals = [httpx.Response(503, json={"detail": "Kafka is away"}, headers={"Retry-After": "2"})] * 3
    slept: list[float] = []
    monkeypatch.setattr("voxlog.client.sync.time.sleep", slept.append)

    def unavailable(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and refusals:
            api.requests.append(request)
            return refusals.pop()
        return api.handler(request)

    stream = io.StringIO()
    with api.client(unavailable, RetryPolicy(attempts=5, budget_s=10.0, base_s=0.001, max_s=0.002)) as client:
        paths = speak(
            client, book, SpeakOptions(voice="v"), tmp_path / "out", ProgressBar(stream, live=False), poll_s=0
        )
    submissions = api.submissions()
    assert len(submissions) == 4
    assert len({r.headers["Idempotency-Key"] for r in submissions}) == 1
    assert len({r.content for r in submissions}) == 1
    assert slept == [2.0, 2.0, 2.0]  # each wait as long as Retry-After said
    assert stream.getvalue().startswith(f"submitted document {DOC_ID}")
    assert len(paths) == 3


def test_ctrl_c_after_submission_names_the_document(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())

    def interrupted(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/v1/documents/{DOC_ID}":
            raise KeyboardInterrupt
        return api.handler(request)

    with api.client(interrupted) as client, pytest.raises(SpeakInterrupted) as raised:
        speak(client, book, SpeakOptions(voice="v"), tmp_path / "out", poll_s=0)
    assert raised.value.document_id == DOC_ID


def speak_args(book: Path) -> argparse.Namespace:
    return argparse.Namespace(
        file=book,
        api="http://api.test/",
        voice=None,
        format="wav",
        speed=None,
        lang=None,
        title=None,
        out=None,
        whole=False,
        captions=None,
        timeout=10.0,
        no_progress=True,
    )


def test_run_prints_how_to_resume_and_cancel_and_exits_130(
    book: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    def interrupted(*args: Any, **kwargs: Any) -> list[Path]:
        raise SpeakInterrupted(DOC_ID)

    monkeypatch.setattr(speak_cli, "speak", interrupted)
    assert speak_cli.run(speak_args(book)) == 130
    err = capsys.readouterr().err
    assert "run the same command again" in err
    assert f"curl -X DELETE http://api.test/v1/documents/{DOC_ID}" in err


def test_run_says_when_the_api_never_answered(book: Path, monkeypatch: pytest.MonkeyPatch):
    def unreachable(client: Client, *args: Any, **kwargs: Any) -> list[Path]:
        raise ApiError("the voices", None, "no answer (ConnectError: refused) (gave up after 40 attempts)")

    monkeypatch.setattr(speak_cli, "speak", unreachable)
    with pytest.raises(VoxlogError, match=r"cannot talk to the API at http://api.test: no answer \(ConnectError"):
        speak_cli.run(speak_args(book))


def test_the_command_line_parses_every_option():
    from voxlog.cli import build_parser

    argv = ["speak", "b.epub", "--api", "http://h:1", "--voice", "v", "--format", "mp3", "--speed", "1.5"]
    argv += ["--lang", "fr", "--title", "T", "--out", "o", "--whole", "--captions", "vtt"]
    argv += ["--timeout", "60", "--no-progress"]
    given = vars(build_parser().parse_args(argv))
    assert given == {
        "log_level": "INFO",
        "command": "speak",
        "file": Path("b.epub"),
        "api": "http://h:1",
        "voice": "v",
        "format": "mp3",
        "speed": 1.5,
        "lang": "fr",
        "title": "T",
        "out": Path("o"),
        "whole": True,
        "captions": "vtt",
        "timeout": 60.0,
        "no_progress": True,
    }
    defaults = vars(build_parser().parse_args(["speak", "b.txt"]))
    assert defaults == {
        **given,
        "file": Path("b.txt"),
        "api": None,
        "voice": None,
        "format": "wav",
        "speed": None,
        "lang": None,
        "title": None,
        "out": None,
        "whole": False,
        "captions": None,
        "timeout": 86400.0,
        "no_progress": False,
    }
    with pytest.raises(SystemExit):
        build_parser().parse_args(["speak", "b.txt", "--format", "ogg"])


def test_the_default_out_sits_next_to_the_file():
    assert default_out(Path("/books/Moby Dick.epub")) == Path("/books/Moby Dick_audio")


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Chapter 1: The Beginning", "chapter-1-the-beginning"),
        ("L'été à Paris", "l-ete-a-paris"),
        ("  Ünïcödé — Ärger!  ", "unicode-arger"),
        ("Straße", "strasse"),
        ("Глава первая", "глава-первая"),
        ("第一章 始まり", "第一章-始まり"),
        ("Ὀδύσσεια", "οδυσσεια"),
        ("ﬁnal ½", "final-1-2"),
        ("snake_case__name", "snake-case-name"),
        ("../../etc/passwd", "etc-passwd"),
        ("???", "untitled"),
        ("", "untitled"),
        ("a" * 70, "a" * 60),
        ("word " * 20, "-".join(["word"] * 12)),
    ],
)
def test_slugify(title: str, slug: str):
    assert slugify(title) == slug


def test_chapter_file_names_are_numbered_from_one_and_padded():
    assert chapter_file_name(1, 9, "Prologue", "wav") == "01-prologue.wav"
    assert chapter_file_name(7, 120, "Épilogue", "raw") == "007-epilogue.raw"
    assert chapter_file_name(3, 3, "***", "mp3") == "03-chapter.mp3"


def test_captions_are_written_beside_each_audio_file_in_the_format_asked(book: Path, tmp_path: Path):
    api = FakeApi(completed_script())
    out = tmp_path / "out"
    with api.client() as client:
        paths = speak(client, book, SpeakOptions(voice="v", whole=True, captions="vtt"), out, poll_s=0)

    assert paths[-3:] == [out / "01-prologue.vtt", out / "02-l-ete-a-paris.vtt", out / "my-book.vtt"]
    assert (out / "01-prologue.vtt").read_bytes() == b"vtt of /chapters/0"
    assert (out / "02-l-ete-a-paris.vtt").read_bytes() == b"vtt of /chapters/1"
    assert (out / "my-book.vtt").read_bytes() == b"vtt of None"
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)
