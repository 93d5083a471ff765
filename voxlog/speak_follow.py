"""What `voxlog speak` does once its document was accepted: follow it on the server (reads the API holds until a
part changes), show its progress, and write each chapter as soon as it is complete, then the table of contents,
the whole document and the captions, all through :mod:`voxlog.client`.

An API that is away for a while (no answer, 503) is ridden out by the client's :class:`RetryPolicy`; an audio
file that is not ready yet (409) is asked for again after the next change.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final, TextIO, TypeVar

from producers.views import DocumentView
from voxlog.client import ApiError, Client
from voxlog.client import operations as ops
from voxlog.errors import VoxlogError

_SLUG_MAX: Final = 60
_FAILED: Final = ("failed", "cancelled")
T = TypeVar("T")


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


def chapter_file_name(number: int, count: int, title: str, extension: str) -> str:
    """``NN-<slug>.<ext>``: ``number`` is 1-based, zero-padded to the width of ``count`` (at least 2)."""
    width = max(2, len(str(count)))
    return f"{number:0{width}d}-{slugify(title, fallback='chapter')}.{extension}"


def _duration(seconds: float) -> str:
    total = round(max(seconds, 0.0))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _eta(moment: datetime | None, now: datetime | None = None) -> str | None:
    """The estimated finish in local time: the time of day, with the date when it is not today."""
    if moment is None:
        return None
    local = moment.astimezone()
    today = (now or datetime.now().astimezone()).date()
    return local.strftime("%H:%M:%S") if local.date() == today else local.strftime("%Y-%m-%d %H:%M")


def progress_line(view: DocumentView, width: int = 24, now: datetime | None = None) -> str:
    """``[#####-----] 12/80 parts  3m20s of audio  ETA 14:05:10`` for a document's status."""
    total, completed = view.parts.total, view.parts.completed
    filled = min(width, width * completed // total) if total else 0
    line = f"[{'#' * filled}{'-' * (width - filled)}] {completed}/{total} parts"
    line += f"  {_duration(view.audio_seconds)} of audio"
    if view.parts.failed:
        line += f"  {view.parts.failed} failed"
    eta = _eta(view.estimated_finish, now)
    if eta is not None and view.state not in ops.ENDED_DOCUMENT:
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

    def update(self, view: DocumentView) -> None:
        line = progress_line(view, self._width)
        if self._live:
            padding = " " * max(0, self._drawn - len(line))
            self._stream.write("\r" + line + padding)
            self._drawn = len(line)
        else:
            if view.parts.completed == self._last:
                return
            self._last = view.parts.completed
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = 0


def _failure(view: DocumentView) -> VoxlogError:
    parts = view.parts
    return VoxlogError(
        f"document {view.document_id} {view.state}: {parts.completed} of {parts.total} parts completed,"
        f" {parts.failed} failed, {parts.cancelled} cancelled"
    )


def _not_ready(exc: ApiError) -> bool:
    """409: the audio (or its captions, or the table of contents) is not complete yet."""
    return exc.status == 409


@dataclass
class Follower:
    """Follows one document on the server until every chapter, the table of contents and (``whole``) the whole
    document are written, or the deadline. ``poll_s``: the pause between reads the API did not hold (an
    answer with no change) or while an audio file is not ready yet."""

    client: Client
    document_id: uuid.UUID
    out: Path
    extension: str
    captions_format: ops.CaptionFormat | None
    progress: ProgressBar | None
    poll_s: float
    deadline: float
    timeout_s: float
    written: dict[int, Path] = field(default_factory=dict)  # chapter index -> its file
    captions: list[Path] = field(default_factory=list)  # the caption files written, in order
    view: DocumentView | None = None
    _waiting_for_audio: bool = False  # a chapter's audio answered 409: read again soon, without holding

    def follow(self, whole: bool) -> list[Path]:
        """The chapters, ``toc.json`` and (``whole``) the whole document, then every caption file written."""
        self.chapters()
        paths = [self.written[index] for index in sorted(self.written)]
        paths.append(self.toc())
        if whole:
            paths.append(self.whole())
        return paths + self.captions

    def chapters(self) -> None:
        """Write each chapter as soon as it is complete, until the document is."""
        started = time.monotonic()
        while True:
            seen = self.view
            try:
                view = self._read()
            except ApiError as exc:  # 404: a document just accepted is not projected yet
                if exc.status != 404 or time.monotonic() - started > ops.VISIBLE_WITHIN_S:
                    raise
                view = None
            if view is not None and self._written_all(view):
                return
            if time.monotonic() >= self.deadline:
                parts = self.view.parts if self.view is not None else None
                raise VoxlogError(
                    f"document {self.document_id} did not finish within {self.timeout_s:.0f}s"
                    f" ({parts.completed if parts else '?'} of {parts.total if parts else '?'} parts); it goes on"
                    " on the server: run the same command again to resume"
                )
            if view is None or self._waiting_for_audio or _progress(view) == _progress(seen):
                self._pause()

    def _read(self) -> DocumentView:
        """The document's status: held by the API until a part changes, unless an audio file is awaited."""
        if self._waiting_for_audio:
            return self.client.document(self.document_id)
        left = max(0.0, self.deadline - time.monotonic())
        return self.client.document(self.document_id, wait_s=min(ops.WAIT_S, left))

    def _written_all(self, view: DocumentView) -> bool:
        self.view, self._waiting_for_audio = view, False
        if self.progress is not None:
            self.progress.update(view)
        if view.state in _FAILED:
            raise _failure(view)
        chapters = sorted(view.chapters, key=lambda c: c.index)
        for number, chapter in enumerate(chapters, start=1):
            if chapter.index in self.written or not (view.state == "completed" or chapter.completed >= chapter.parts):
                continue
            path = self.out / chapter_file_name(number, len(chapters), chapter.title, self.extension)
            url = chapter.links.get("audio") or ops.audio_url(document_id=self.document_id, chapter=chapter.index)
            try:
                self.client.download(url, path)
            except ApiError as exc:
                if not _not_ready(exc):
                    raise
                self._waiting_for_audio = True
                continue
            self.written[chapter.index] = path
            self._captions(path, chapter.index)
        return view.state == "completed" and len(self.written) == len(chapters)

    def toc(self) -> Path:
        toc = self._when_ready(
            lambda: self.client.toc(self.document_id), f"the table of contents of {self.document_id}"
        )
        path = self.out / "toc.json"
        path.write_text(json.dumps(toc.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    def whole(self) -> Path:
        title = self.view.title if self.view is not None else ""
        path = self.out / f"{slugify(title)}.{self.extension}"
        links = self.view.links if self.view is not None else {}
        url = links.get("audio") or ops.audio_url(document_id=self.document_id)
        self._when_ready(lambda: self.client.download(url, path), f"the whole audio of document {self.document_id}")
        self._captions(path, None)
        return path

    def _captions(self, audio: Path, chapter: int | None) -> None:
        """The captions of ``audio`` beside it (``--captions``), named as it is with the format's suffix."""
        fmt = self.captions_format
        if fmt is None:
            return
        text = self._when_ready(
            lambda: self.client.captions(fmt=fmt, document_id=self.document_id, chapter=chapter),
            f"the captions of {audio.name}",
        )
        path = audio.with_suffix(f".{fmt}")
        partial = path.with_name(path.name + ".part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
        self.captions.append(path)

    def _when_ready(self, fetch: Callable[[], T], what: str) -> T:
        """``fetch()``, asked again while it answers 409, until the deadline."""
        while True:
            try:
                return fetch()
            except ApiError as exc:
                if not _not_ready(exc):
                    raise
            if time.monotonic() >= self.deadline:
                raise VoxlogError(f"{what} was not ready within {self.timeout_s:.0f}s")
            self._pause()

    def _pause(self) -> None:
        if self.poll_s > 0:
            time.sleep(self.poll_s)


def _progress(view: DocumentView | None) -> object:
    """What a change is: the state and the parts' counts (an estimate moves on every read)."""
    return None if view is None else (view.state, view.parts, tuple(c.completed for c in view.chapters))
