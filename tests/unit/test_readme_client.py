"""docs/client.md's Python client examples, run as written against a fake API (httpx.MockTransport), so that
they cannot drift from voxlog.client: the blocking one, the asyncio one, and the webhook receiver; README.md's
example is the first of them."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from foundation.settings import DevSettings
from tests.support.view_bodies import accepted_body, error, job_body, voices_body
from voxlog.client import sign_webhook

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGE = ROOT / "docs" / "client.md"
KEY = "vxl_k1_secret"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


def examples() -> list[str]:
    """The ``python`` blocks of docs/client.md, in order."""
    return python_blocks(PAGE.read_text())


def readme_examples() -> list[str]:
    """The ``python`` blocks of README.md's "Python client" section."""
    text = README.read_text()
    start = text.index("\n## Python client\n")
    end = re.compile(r"^#{1,2} ", re.M).search(text, start + 2)
    return python_blocks(text[start : end.start() if end else len(text)])


def run_example(n: int) -> dict[str, Any]:
    """Run example ``n`` as a script would (``__main__``); its names afterwards."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(examples()[n], f"docs/client.md (example {n + 1})", "exec"), namespace)
    return namespace


class FakeApi:
    """Voices, submissions, reads it holds (a job is claimed at its first read, completed at its second) and
    each job's audio (its text's bytes behind a RIFF header); records every request."""

    def __init__(self) -> None:
        self.texts: dict[uuid.UUID, str] = {}
        self.reads: dict[uuid.UUID, int] = {}
        self.requests: list[httpx.Request] = []

    def audio(self, job_id: uuid.UUID) -> bytes:
        return b"RIFF" + self.texts[job_id].encode()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path, method = request.url.path, request.method
        if (method, path) == ("GET", "/v1/voices"):
            return httpx.Response(200, json=voices_body("af_heart"))
        if (method, path) == ("POST", "/v1/jobs"):
            text = httpx.Response(200, content=request.content).json()["text"]
            job_id = uuid.uuid5(uuid.NAMESPACE_URL, text)
            self.texts[job_id] = text
            return httpx.Response(202, json=accepted_body(job_id))
        match = re.fullmatch(r"/v1/jobs/([0-9a-f-]{36})(/audio)?", path)
        if method != "GET" or match is None or uuid.UUID(match[1]) not in self.texts:
            return error(404, f"no route or job {path}")
        job_id = uuid.UUID(match[1])
        if match[2]:
            return httpx.Response(200, content=self.audio(job_id), headers={"content-type": "audio/wav"})
        self.reads[job_id] = self.reads.get(job_id, 0) + 1
        state = "completed" if self.reads[job_id] >= 2 else "claimed"
        held = {"Preference-Applied": "wait=" + request.headers["prefer"].removeprefix("wait=")}
        return httpx.Response(200, json=job_body(job_id, self.texts[job_id], state), headers=held)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeApi:
    """Every httpx client the examples build talks to the fake; they run in ``tmp_path`` with the key set."""
    fake = FakeApi()
    transport = httpx.MockTransport(fake)

    class Blocking(httpx.Client):
        def __init__(self, **options: Any) -> None:
            super().__init__(**{**options, "transport": transport})

    class Asyncio(httpx.AsyncClient):
        def __init__(self, **options: Any) -> None:
            super().__init__(**{**options, "transport": transport})

    monkeypatch.setattr(httpx, "Client", Blocking)
    monkeypatch.setattr(httpx, "AsyncClient", Asyncio)
    monkeypatch.setenv("VOXLOG_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    return fake


def test_the_page_has_a_blocking_an_asyncio_and_a_webhook_example():
    blocks = examples()
    assert len(blocks) == 3
    assert "Client(" in blocks[0]
    assert "AsyncClient(" in blocks[1]
    assert "verify_webhook(" in blocks[2]


def test_the_readme_shows_the_blocking_example_as_the_page_does():
    assert readme_examples() == examples()[:1], "README.md's Python client example is docs/client.md's first"


def sent_as_documented(api: FakeApi) -> None:
    """To the dev stack's API, with the key, each read one the API may hold."""
    port = DevSettings.model_fields["api_port"].default
    assert {(r.url.host, r.url.port) for r in api.requests} == {("127.0.0.1", port)}
    assert {r.headers["authorization"] for r in api.requests} == {f"Bearer {KEY}"}
    reads = [r for r in api.requests if re.fullmatch(r"/v1/jobs/[0-9a-f-]{36}", r.url.path)]
    assert reads
    assert all(r.headers["prefer"].startswith("wait=") for r in reads)


def test_the_blocking_example_submits_waits_and_downloads(api: FakeApi, capsys: pytest.CaptureFixture[str]):
    run_example(0)
    (job_id,) = api.texts
    assert Path("hello.wav").read_bytes() == api.audio(job_id)
    assert not Path("hello.wav.part").exists()
    assert capsys.readouterr().out == f"hello.wav: job {job_id}, 4000 ms\n"
    submission = next(r for r in api.requests if r.method == "POST")
    assert submission.headers["idempotency-key"]
    sent_as_documented(api)


def test_the_asyncio_example_does_the_same_for_two_jobs(api: FakeApi, capsys: pytest.CaptureFixture[str]):
    run_example(1)
    assert len(api.texts) == 2
    for n, job_id in enumerate(api.texts, 1):
        assert Path(f"part-{n}.wav").read_bytes() == api.audio(job_id)
    assert capsys.readouterr().out == "".join(
        f"part-{n}.wav: job {job_id}, completed\n" for n, job_id in enumerate(api.texts, 1)
    )
    sent_as_documented(api)


def test_the_webhook_example_answers_a_signed_delivery_and_refuses_others(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VOXLOG_WEBHOOK_SECRET", SECRET)
    receive = run_example(2)["receive"]
    body, stamp = b'{"type":"job.completed"}', int(time.time())
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(stamp),
               "webhook-signature": sign_webhook(SECRET, "msg_1", stamp, body)}  # fmt: skip
    assert receive(headers, body) == 204
    assert receive(headers, body + b" ") == 400  # altered
    old = stamp - 3600  # replayed an hour later
    replayed = {**headers, "webhook-timestamp": str(old), "webhook-signature": sign_webhook(SECRET, "msg_1", old, body)}
    assert receive(replayed, body) == 400
