"""`voxlog speak FILE`: have the running API speak a document (EPUB, Markdown or plain text), show its
progress, and write each chapter's audio (and the table of contents; with ``--captions``, each audio
file's captions beside it) into a directory.

The submission carries an ``Idempotency-Key`` computed from the file and the options, so running the
same command again after a crash or a Ctrl-C finds the same document on the server (which went on
speaking meanwhile) instead of submitting it again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mimetypes
import re
import sys
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

import httpx

from voxlog.client_key import client_headers
from voxlog.demo import first_voice
from voxlog.errors import VoxlogError

FORMATS: Final = ("wav", "mp3", "pcm")
_EXTENSIONS: Final = {"pcm": "raw"}
DEFAULT_TIMEOUT_S: Final = 86400.0
_OUTAGE_S: Final = 120.0  # how long the API may keep failing (connection refused, 5xx) before giving up
_VOICE_WAIT_S: Final = 300.0
_TERMINAL_FAILURES: Final = ("failed", "cancelled")
_SLUG_MAX: Final = 60


@dataclass(frozen=True)
class SpeakOptions:
    """What the submission asks for; ``None`` leaves a choice to the server (a voice: the first one announced)."""

    voice: str | None = None
    format: str = "wav"
    speed: float | None = None
    lang: str | None = None
    title: str | None = None
    whole: bool = False
    captions: str | None = None  # also write each audio file's captions in this format (srt, vtt, json)

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


def slugify(title: str, fallback: str = "untitled") -> str:
    """A file-name-safe form of a title: lower case, accents dropped, other letters kept (any script),
    every other run of characters a single "-", at most 60 characters; ``fallback`` when nothing is left."""
    decomposed = unicodedata.normalize("NFKD", title)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    slug = re.sub(r"[\W_]+", "-", bare.casefold()).strip("-")
    if len(slug) > _SLUG_MAX:
        cut = slug[:_SLUG_MAX]
        slug = (cut.rsplit("-", 1)[0] if "-" in cut[_SLUG_MAX // 2 :] else cut).strip("-")
    return unicodedata.normalize("NFC", slug) or fallback


def idempotency_key(data: bytes, filename: str, fields: Mapping[str, str]) -> str:
    """SHA-256 (hex) of the file's bytes, its name (the server reads the markup from its extension) and
    the form fields: the same input gives the same key, any other option another one."""
    digest = hashlib.sha256()
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)
    digest.update(json.dumps({"filename": filename, "fields": dict(fields)}, sort_keys=True).encode())
    return digest.hexdigest()


def chapter_file_name(number: int, count: int, title: str, extension: str) -> str:
    """``NN-<slug>.<ext>``: ``number`` is 1-based, zero-padded to the width of ``count`` (at least 2)."""
    width = max(2, len(str(count)))
    return f"{number:0{width}d}-{slugify(title, fallback='chapter')}.{extension}"


def default_out(path: Path) -> Path:
    """Next to the file: its stem and ``_audio``."""
    return path.with_name(f"{path.stem}_audio")


def _duration(seconds: float) -> str:
    total = round(max(seconds, 0.0))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _eta(value: object, now: datetime | None = None) -> str | None:
    """The estimated finish in local time: the time of day, with the date when it is not today."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone()
    today = (now or datetime.now().astimezone()).date()
    return local.strftime("%H:%M:%S") if local.date() == today else local.strftime("%Y-%m-%d %H:%M")


def progress_line(status: Mapping[str, Any], width: int = 24, now: datetime | None = None) -> str:
    """``[#####-----] 12/80 parts  3m20s of audio  ETA 14:05:10`` for a document's status."""
    parts = status.get("parts") or {}
    total = int(parts.get("total") or 0)
    completed = int(parts.get("completed") or 0)
    filled = min(width, width * completed // total) if total else 0
    line = f"[{'#' * filled}{'-' * (width - filled)}] {completed}/{total} parts"
    line += f"  {_duration(float(status.get('audio_seconds') or 0.0))} of audio"
    if failed := int(parts.get("failed") or 0):
        line += f"  {failed} failed"
    eta = _eta(status.get("estimated_finish"), now)
    if eta is not None and status.get("state") not in ("completed", *_TERMINAL_FAILURES):
        line += f"  ETA {eta}"
    return line


class ProgressBar:
    """One line on ``stream``: redrawn in place when ``live`` (a terminal), else printed again only when
    the count of completed parts changes."""

    def __init__(self, stream: TextIO, *, live: bool, width: int = 24) -> None:
        self._stream = stream
        self._live = live
        self._width = width
        self._drawn = 0  # characters of the live line now on screen
        self._last: int | None = None

    def note(self, line: str) -> None:
        """A line of its own (above the bar)."""
        self._end_line()
        self._stream.write(line + "\n")
        self._stream.flush()

    def update(self, status: Mapping[str, Any]) -> None:
        line = progress_line(status, self._width)
        if self._live:
            padding = " " * max(0, self._drawn - len(line))
            self._stream.write("\r" + line + padding)
            self._drawn = len(line)
        else:
            completed = int((status.get("parts") or {}).get("completed") or 0)
            if completed == self._last:
                return
            self._last = completed
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = 0


def _error(what: str, response: httpx.Response) -> VoxlogError:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if detail is None:
        detail = response.text.strip()[:500] or response.reason_phrase
    return VoxlogError(f"{what} ({response.status_code}): {detail}")


class _Outage:
    """Tolerates the API failing (unreachable, 5xx, a document not projected yet) for ``limit_s`` in a row."""

    def __init__(self, limit_s: float) -> None:
        self._limit_s = limit_s
        self._since: float | None = None

    def ok(self) -> None:
        self._since = None

    def failed(self, reason: str) -> None:
        now = time.monotonic()
        if self._since is None:
            self._since = now
        elif now - self._since >= self._limit_s:
            raise VoxlogError(f"the API kept failing for {self._limit_s:.0f}s: {reason}")


def submit(client: httpx.Client, path: Path, options: SpeakOptions, voice: str) -> tuple[dict[str, Any], bool]:
    """POST the file to /v1/documents; returns the answer, and whether it was an earlier submission's."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise VoxlogError(f"cannot read {path}: {exc.strerror or exc}") from exc
    fields = options.fields(voice)
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    response = client.post(
        "/v1/documents",
        files={"file": (path.name, data, content_type)},
        data=fields,
        headers={"Idempotency-Key": idempotency_key(data, path.name, fields)},
    )
    if response.status_code not in (200, 202):
        raise _error(f"the API refused {path.name}", response)
    return response.json(), response.status_code == 200


def _poll(client: httpx.Client, document_id: str, outage: _Outage) -> dict[str, Any] | None:
    try:
        response = client.get(f"/v1/documents/{document_id}")
    except httpx.TransportError as exc:
        outage.failed(f"{type(exc).__name__}: {exc}")
        return None
    if response.status_code == 404 or response.status_code >= 500:  # 404: the document is not projected yet
        outage.failed(str(_error(f"status of document {document_id}", response)))
        return None
    if response.status_code != 200:
        raise _error(f"status of document {document_id}", response)
    outage.ok()
    status: dict[str, Any] = response.json()
    return status


def _download(client: httpx.Client, url: str, dest: Path, outage: _Outage) -> bool:
    """Stream ``url`` into ``dest`` (through a ``.part`` file); False when it is not ready yet (409) or the
    API failed for now."""
    partial = dest.with_name(dest.name + ".part")
    try:
        with client.stream("GET", url) as response:
            if response.status_code == 409:
                outage.ok()
                return False
            if response.status_code >= 500:
                response.read()
                outage.failed(str(_error(f"GET {url}", response)))
                return False
            if response.status_code != 200:
                response.read()
                raise _error(f"GET {url}", response)
            with partial.open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
    except httpx.TransportError as exc:
        outage.failed(f"{type(exc).__name__}: {exc}")
        return False
    partial.replace(dest)
    outage.ok()
    return True


def _chapter_done(chapter: Mapping[str, Any], state: str) -> bool:
    return state == "completed" or int(chapter.get("completed") or 0) >= int(chapter.get("parts") or 0)


def _chapter_url(document_id: str, chapter: Mapping[str, Any]) -> str:
    links = chapter.get("links") or {}
    return str(links.get("audio") or f"/v1/documents/{document_id}/chapters/{chapter['index']}/audio")


def _failure(document_id: str, status: Mapping[str, Any]) -> VoxlogError:
    parts = status.get("parts") or {}
    return VoxlogError(
        f"document {document_id} {status.get('state')}: {parts.get('completed', 0)} of {parts.get('total', 0)}"
        f" parts completed, {parts.get('failed', 0)} failed, {parts.get('cancelled', 0)} cancelled"
    )


def speak(
    client: httpx.Client,
    path: Path,
    options: SpeakOptions,
    out: Path,
    progress: ProgressBar | None = None,
    *,
    poll_s: float = 1.0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    outage_s: float = _OUTAGE_S,
) -> list[Path]:
    """Submit ``path``, follow it to the end, write its chapters (``NN-<title>.<ext>``, each as soon as it
    completes), ``toc.json`` and, with ``options.whole``, the whole document into ``out``, and with
    ``options.captions`` each audio file's captions beside it; returns the paths written. Raises
    :class:`VoxlogError` when it ends failed or cancelled or outlasts ``timeout_s``, and
    :class:`SpeakInterrupted` on Ctrl-C once the document was submitted."""
    deadline = time.monotonic() + timeout_s
    voice = options.voice or first_voice(client, min(_VOICE_WAIT_S, timeout_s))
    document, resumed = submit(client, path, options, voice)
    document_id = str(document["document_id"])
    try:
        if progress is not None:
            progress.note(
                f"{'resuming' if resumed else 'submitted'} document {document_id}: {document.get('title')!r},"
                f" {len(document.get('chapters') or [])} chapters, {document.get('parts')} parts,"
                f" {document.get('chars')} characters"
            )
        out.mkdir(parents=True, exist_ok=True)
        follower = _Follower(
            client, document_id, options, out, progress, poll_s, deadline, timeout_s, _Outage(outage_s)
        )
        return _follow(follower)
    except KeyboardInterrupt:
        raise SpeakInterrupted(document_id) from None


@dataclass
class _Follower:
    """Follows one document on the server until every chapter, the table of contents and (``whole``) the whole
    book are written, or the deadline."""

    client: httpx.Client
    document_id: str
    options: SpeakOptions
    out: Path
    progress: ProgressBar | None
    poll_s: float
    deadline: float
    timeout_s: float
    outage: _Outage
    written: dict[int, Path] = field(default_factory=dict)  # chapter index -> its file
    captions: list[Path] = field(default_factory=list)  # the caption files written, in order
    status: dict[str, Any] = field(default_factory=dict)

    def chapters(self) -> None:
        """Write each chapter as soon as it is complete, until the document is."""
        while True:
            polled = _poll(self.client, self.document_id, self.outage)
            if polled is not None and self._written_all(polled):
                return
            if time.monotonic() >= self.deadline:
                parts = self.status.get("parts") or {}
                raise VoxlogError(
                    f"document {self.document_id} did not finish within {self.timeout_s:.0f}s"
                    f" ({parts.get('completed', '?')} of {parts.get('total', '?')} parts); it goes on on the server:"
                    " run the same command again to resume"
                )
            self._pause()

    def _written_all(self, status: dict[str, Any]) -> bool:
        self.status = status
        if self.progress is not None:
            self.progress.update(status)
        state = str(status.get("state"))
        if state in _TERMINAL_FAILURES:
            raise _failure(self.document_id, status)
        chapters = sorted(status.get("chapters") or [], key=lambda c: int(c["index"]))
        for number, chapter in enumerate(chapters, start=1):
            index = int(chapter["index"])
            if index in self.written or not _chapter_done(chapter, state):
                continue
            name = chapter_file_name(number, len(chapters), str(chapter.get("title") or ""), self.options.extension)
            if _download(self.client, _chapter_url(self.document_id, chapter), self.out / name, self.outage):
                self.written[index] = self.out / name
                self._captions(f"/v1/documents/{self.document_id}/chapters/{index}/captions", self.out / name)
        return state == "completed" and len(self.written) == len(chapters)

    def toc(self) -> Path:
        links = self.status.get("links") or {}
        toc = self.client.get(str(links.get("toc") or f"/v1/documents/{self.document_id}/toc"))
        if toc.status_code != 200:
            raise _error(f"table of contents of document {self.document_id}", toc)
        path = self.out / "toc.json"
        path.write_text(json.dumps(toc.json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    def whole(self) -> Path:
        path = self.out / f"{slugify(str(self.status.get('title') or ''))}.{self.options.extension}"
        url = str((self.status.get("links") or {}).get("audio") or f"/v1/documents/{self.document_id}/audio")
        while not _download(self.client, url, path, self.outage):
            if time.monotonic() >= self.deadline:
                raise VoxlogError(
                    f"the whole audio of document {self.document_id} was not ready within {self.timeout_s:.0f}s"
                )
            self._pause()
        self._captions(f"/v1/documents/{self.document_id}/captions", path)
        return path

    def _captions(self, url: str, audio: Path) -> None:
        """The captions of ``audio`` beside it (``--captions``), named as it is with the format's suffix."""
        fmt = self.options.captions
        if fmt is None:
            return
        path = audio.with_suffix(f".{fmt}")
        while not _download(self.client, f"{url}?format={fmt}", path, self.outage):
            if time.monotonic() >= self.deadline:
                raise VoxlogError(f"the captions {url} were not ready within {self.timeout_s:.0f}s")
            self._pause()
        self.captions.append(path)

    def _pause(self) -> None:
        if self.poll_s > 0:
            time.sleep(self.poll_s)


def _follow(follower: _Follower) -> list[Path]:
    follower.chapters()
    paths = [follower.written[index] for index in sorted(follower.written)]
    paths.append(follower.toc())
    if follower.options.whole:
        paths.append(follower.whole())
    return paths + follower.captions


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
        with httpx.Client(base_url=api, timeout=httpx.Timeout(60.0, connect=10.0), headers=client_headers()) as client:
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
    except httpx.TransportError as exc:
        raise VoxlogError(f"cannot talk to the API at {api}: {type(exc).__name__}: {exc}") from exc
    for written in paths:
        print(f"wrote {written}")
    return 0
