"""`voxlog speak FILE`: have the running API speak a document (EPUB, Markdown or plain text), show its
progress, and write each chapter's audio (and the table of contents; with ``--captions``, each audio
file's captions beside it) into a directory, through :mod:`voxlog.client` (following the document is
:mod:`voxlog.speak_follow`'s).

The submission carries an ``Idempotency-Key`` computed from the file and the options, so running the
same command again after a crash or a Ctrl-C finds the same document on the server (which went on
speaking meanwhile) instead of submitting it again. An API that is away for a while (no answer, 503,
429) is ridden out by the client's retry policy, within ``_OUTAGE_S`` of waiting per request.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from voxlog.client import ApiError, Client, DocumentSubmitted, RetryPolicy
from voxlog.client import operations as ops
from voxlog.client_key import client_key
from voxlog.demo import first_voice
from voxlog.errors import VoxlogError
from voxlog.speak_follow import Follower, ProgressBar

FORMATS: Final = ("wav", "mp3", "pcm")
_EXTENSIONS: Final = {"pcm": "raw"}
DEFAULT_TIMEOUT_S: Final = 86400.0
_OUTAGE_S: Final = 120.0
_RETRY: Final = RetryPolicy(attempts=40, budget_s=_OUTAGE_S)
"""How long the API may keep failing (no answer, 503, 502, 504, 429) per request before speak gives up: the
budget of waiting binds (40 attempts at waits of up to 15 s are more than 120 s)."""
_VOICE_WAIT_S: Final = 300.0


@dataclass(frozen=True)
class SpeakOptions:
    """What the submission asks for; ``None`` leaves a choice to the server (a voice: the first one announced)."""

    voice: str | None = None
    format: str = "wav"
    speed: float | None = None
    lang: str | None = None
    title: str | None = None
    whole: bool = False
    captions: ops.CaptionFormat | None = None  # also write each audio file's captions in this format

    @property
    def extension(self) -> str:
        return _EXTENSIONS.get(self.format, self.format)

    def fields(self, voice: str) -> dict[str, str]:
        """The form fields of the submission (only those given)."""
        fields = {"voice": voice, "format": self.format}
        if self.speed is not None:
            fields["speed"] = repr(float(self.speed))
        if self.lang is not None:
            fields["lang"] = self.lang
        if self.title is not None:
            fields["title"] = self.title
        return fields


class SpeakInterrupted(KeyboardInterrupt):
    """Ctrl-C after the document was submitted: it goes on being spoken on the server."""

    def __init__(self, document_id: str) -> None:
        super().__init__(document_id)
        self.document_id = document_id


def idempotency_key(data: bytes, filename: str, fields: Mapping[str, str]) -> str:
    """SHA-256 (hex) of the file's bytes, its name (the server reads the markup from its extension) and
    the form fields: the same input gives the same key, any other option another one."""
    digest = hashlib.sha256()
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)
    digest.update(json.dumps({"filename": filename, "fields": dict(fields)}, sort_keys=True).encode())
    return digest.hexdigest()


def default_out(path: Path) -> Path:
    """Next to the file: its stem and ``_audio``."""
    return path.with_name(f"{path.stem}_audio")


def submit(client: Client, path: Path, options: SpeakOptions, voice: str) -> DocumentSubmitted:
    """POST the file to /v1/documents with its derived key; ``replayed`` when it was an earlier submission's."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise VoxlogError(f"cannot read {path}: {exc.strerror or exc}") from exc
    fields = options.fields(voice)
    key = idempotency_key(data, path.name, fields)
    given = {name: value for name, value in fields.items() if name != "voice"}
    try:
        return client.submit_document(path, voice=voice, idempotency_key=key, **given)
    except OSError as exc:  # the client reads the file again: it went away meanwhile
        raise VoxlogError(f"cannot read {path}: {exc.strerror or exc}") from exc


def speak(
    client: Client,
    path: Path,
    options: SpeakOptions,
    out: Path,
    progress: ProgressBar | None = None,
    *,
    poll_s: float = 1.0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Path]:
    """Submit ``path``, follow it to the end, write its chapters (``NN-<title>.<ext>``, each as soon as it
    completes), ``toc.json`` and, with ``options.whole``, the whole document into ``out``, and with
    ``options.captions`` each audio file's captions beside it; returns the paths written. Raises
    :class:`VoxlogError` when it ends failed or cancelled, outlasts ``timeout_s`` or the API stays away past
    the client's retry policy, and :class:`SpeakInterrupted` on Ctrl-C once the document was submitted.
    ``poll_s``: the pause between reads the API does not hold."""
    deadline = time.monotonic() + timeout_s
    voice = options.voice or first_voice(client, min(_VOICE_WAIT_S, timeout_s))
    document = submit(client, path, options, voice)
    try:
        if progress is not None:
            progress.note(
                f"{'resuming' if document.replayed else 'submitted'} document {document.document_id}:"
                f" {document.title!r}, {len(document.chapters)} chapters, {document.parts} parts,"
                f" {document.chars} characters"
            )
        out.mkdir(parents=True, exist_ok=True)
        follower = Follower(
            client, document.document_id, out, options.extension, options.captions, progress, poll_s, deadline,
            timeout_s,
        )  # fmt: skip
        return follower.follow(options.whole)
    except KeyboardInterrupt:
        raise SpeakInterrupted(str(document.document_id)) from None


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    speak_cmd = commands.add_parser(
        "speak", help="have the API speak a document (EPUB, Markdown, text) and write each chapter's audio"
    )
    speak_cmd.add_argument("file", type=Path, help="the document: .epub, .md/.markdown, anything else is plain text")
    speak_cmd.add_argument("--api", default=None, help="API base URL (default: the dev stack's)")
    speak_cmd.add_argument("--voice", default=None, help="voice (default: the first one a worker announced)")
    speak_cmd.add_argument("--format", choices=FORMATS, default="wav", help="audio format (default: wav)")
    speak_cmd.add_argument("--speed", type=float, default=None, help="speaking rate (default: the server's)")
    speak_cmd.add_argument("--lang", default=None, help="language (default: the server's for the voice)")
    speak_cmd.add_argument("--title", default=None, help="the document's title (default: read from the file)")
    speak_cmd.add_argument(
        "--out", type=Path, default=None, help="directory for the audio (default: FILE's stem + _audio, next to it)"
    )
    speak_cmd.add_argument("--whole", action="store_true", help="also write the whole document as one file")
    speak_cmd.add_argument(
        "--captions",
        nargs="?",
        const="srt",
        choices=("srt", "vtt", "json"),
        default=None,
        help="also write each audio file's captions beside it, as FORMAT (default when given: srt)",
    )
    speak_cmd.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up waiting after this long (default: {DEFAULT_TIMEOUT_S:.0f})",
    )
    speak_cmd.add_argument(
        "--no-progress", action="store_true", help="no live bar: a plain line each time a part completes"
    )


def run(args: argparse.Namespace) -> int:
    from foundation.settings import DevSettings
    from voxlog import devstack

    api = str(args.api or devstack.api_url(DevSettings())).rstrip("/")
    options = SpeakOptions(args.voice, args.format, args.speed, args.lang, args.title, args.whole, args.captions)
    out = args.out if args.out is not None else default_out(args.file)
    bar = ProgressBar(sys.stderr, live=sys.stderr.isatty() and not args.no_progress)
    try:
        with Client(api, api_key=client_key(), timeout_s=60.0, retry=_RETRY) as client:
            try:
                paths = speak(client, args.file, options, out, bar, timeout_s=args.timeout)
            finally:
                bar.close()
    except SpeakInterrupted as exc:
        print(
            f"\ninterrupted: document {exc.document_id} goes on being spoken on the server.\n"
            "  to resume: run the same command again (its Idempotency-Key finds the same document)\n"
            f"  to cancel: curl -X DELETE {api}/v1/documents/{exc.document_id}",
            file=sys.stderr,
        )
        return 130
    except KeyboardInterrupt:
        print(
            "\ninterrupted before the document was accepted; run the same command again to submit it"
            " (if it was accepted meanwhile, its Idempotency-Key finds it)",
            file=sys.stderr,
        )
        return 130
    except ApiError as exc:
        if exc.status is None:  # no answer, through every retry
            raise VoxlogError(f"cannot talk to the API at {api}: {exc.detail}") from exc
        raise
    for written in paths:
        print(f"wrote {written}")
    return 0
