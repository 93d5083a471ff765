"""POST /dev/captioned_speech, Kokoro-FastAPI's captioned speech, for clients written for it.

The body is /v1/audio/speech's (:mod:`producers.speech`) with ``return_timestamps``; the request becomes
an ordinary job and the answer waits for it, in Kokoro-FastAPI's shape: ``{"audio": base64 of the whole
file, "audio_format", "timestamps": [{"word", "start_time", "end_time"}]}``, times in seconds from the
audio's start (:mod:`producers.captions`). Kokoro-FastAPI streams such answers as JSON lines by
default; voxlog answers one line whatever ``stream`` says: the whole audio and every word, which a
client reading lines reads as one chunk. ``return_download_link`` is accepted and gives no link.
"""

from __future__ import annotations

import base64
from typing import Any

from litestar import Request, Response, post
from litestar.params import JSONBody
from pydantic import BaseModel

from producers.api_keys import Principal
from producers.auth import SUBMIT
from producers.captions import timeline
from producers.deps import ApiDeps, Injected
from producers.job_routes import IdempotencyKey, submit_one
from producers.speech import OPENAI_ERRORS, OPENAI_HANDLERS, SpeechRequest, job_request, whole_audio


class CaptionedSpeechRequest(SpeechRequest):
    return_timestamps: bool = True
    return_download_link: bool = False


class WordTimestamp(BaseModel):
    word: str
    start_time: float
    end_time: float


class CaptionedSpeech(BaseModel):
    audio: str
    audio_format: str
    timestamps: list[WordTimestamp] | None


@post(
    "/dev/captioned_speech",
    summary="Kokoro-FastAPI's captioned speech: the whole audio (base64) and each word's times",
    guards=SUBMIT,
    status_code=200,
    responses=OPENAI_ERRORS,
    exception_handlers=dict(OPENAI_HANDLERS),
)
async def captioned_speech(
    data: JSONBody[CaptionedSpeechRequest],
    deps: Injected[ApiDeps],
    principal: Injected[Principal],
    request: Request[Any, Any, Any],
    idempotency_key: IdempotencyKey = None,
) -> Response[CaptionedSpeech]:
    body = await job_request(data, deps)
    answered = await submit_one(deps.submissions, body, idempotency_key, principal, request)
    fmt = body.format.strip().lower()
    job, audio = await whole_audio(deps, answered.job_id, fmt, body.sample_rate)
    timestamps = None
    if data.return_timestamps:
        words, _ = timeline([(job.segments, None)])
        timestamps = [WordTimestamp(word=w.text, start_time=w.start_ms / 1000, end_time=w.end_ms / 1000) for w in words]
    answer = CaptionedSpeech(audio=base64.b64encode(audio).decode(), audio_format=fmt, timestamps=timestamps)
    return Response(answer, headers={"X-Voxlog-Job-Id": str(answered.job_id)})
