"""voxlog.client and the CLI commands built on it, against real processes: ``voxlog demo`` as a process, and the
client's submit, held waits (``Prefer: wait``), documents, captions, speech streams and downloads.

The retry protocol against a killed broker is in tests/e2e/test_outages.py (a broker of its own to kill)."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import soundfile as sf

from tests.support.apps import start_pipeline
from tests.support.cli import voxlog
from voxlog.client import AsyncClient


class Recorder(httpx.AsyncBaseTransport):
    """The network, with every answer's method, path, status and ``Preference-Applied`` written down."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[str, str, int, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        applied = response.headers.get("preference-applied")
        self.seen.append((request.method, request.url.path, response.status_code, applied))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_the_client_and_voxlog_demo_speak_through_real_processes(apps, tmp_path: Path):
    app, voices = await start_pipeline(apps)

    demo = voxlog(app.env, "demo", "--api", app.api, "--voice", voices[0], "--out", str(tmp_path / "demo.wav"))
    assert demo.returncode == 0, demo.stderr
    assert "completed" in demo.stdout
    samples, rate = sf.read(tmp_path / "demo.wav")
    assert rate == 24000
    assert len(samples) > 0

    recorder = Recorder()
    async with AsyncClient(app.api, transport=recorder) as client:
        accepted = await client.submit_job("The client waits for this job without polling.", voices[0])
        done = await client.wait(accepted.job_id, timeout_s=120)
        assert done.state.value == "completed"
        assert done.segment_count
        reads = [seen for seen in recorder.seen if seen[:2] == ("GET", f"/v1/jobs/{accepted.job_id}")]
        assert reads
        # A read before the projector shows the job is a 404 (read again), and holds nothing: the 200s are held.
        held = [applied for _, _, status, applied in reads if status == 200]
        assert held, reads
        assert all(applied is not None and applied.startswith("wait=") for applied in held), reads

        audio = await client.download(f"/v1/jobs/{done.job_id}/audio", tmp_path / "job.wav")
        assert sf.info(audio).frames > 0
        srt = await client.captions(done.job_id)
        assert "-->" in srt

        document = await client.submit_document(
            "# One\n\nThe first chapter.\n\n# Two\n\nThe second chapter.", voice=voices[0]
        )
        finished = await client.wait_document(document.document_id, timeout_s=180)
        assert finished.state == "completed"
        assert finished.parts.completed == finished.parts.total
        whole = await client.download(finished.links["audio"], tmp_path / "book.wav")
        assert sf.info(whole).frames > 0

        streamed = b"".join([chunk async for chunk in client.stream_speech("Streamed speech.", voices[0],
                                                                           response_format="wav")])  # fmt: skip
        assert sf.info(io.BytesIO(streamed)).frames > 0
