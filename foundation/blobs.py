"""Content-addressed blob store for segment audio: events carry the hash and URI, never samples.

A blob's modification time is its last use: :meth:`LocalBlobStore.put`
sets it when a segment is written (or written again with the same bytes),
:meth:`LocalBlobStore.touch` when a finished result is handed out again.
:meth:`LocalBlobStore.remove_unused` deletes a blob only if it was not used
for a given time, deciding after renaming it away, so that a use racing the
deletion either comes first (and keeps the blob) or finds it gone (and the
result is synthesized afresh); never a result handed out whose audio then
disappears.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol
from urllib.parse import unquote, urlparse

from contracts import AudioRef
from foundation.errors import FoundationError


class BlobNotFound(FoundationError):
    """No blob has that hash (it expired, or the store is not the one that wrote it)."""


class BlobStore(Protocol):
    def put(self, data: bytes, suffix: str) -> AudioRef: ...

    def get(self, ref: AudioRef) -> bytes: ...

    def touch(self, refs: Iterable[AudioRef]) -> bool:
        """Mark blobs as used now, before a result is handed out again; ``False`` when one is gone (the
        result cannot be reused then, and is synthesized afresh)."""
        ...


@dataclass(frozen=True)
class StoredBlob:
    ref: AudioRef
    size: int
    used_at: float  # modification time: when it was last written or reused (epoch seconds)


_BLOB_NAME: Final = re.compile(r"^([0-9a-f]{64})(\.[a-z0-9]{1,8})?$")
_DOOMED_WAIT_S: Final = 2.0
_ABANDONED_S: Final = 60.0
_pause = time.sleep


class LocalBlobStore:
    """Blobs in a directory as ``ab/cd/<sha256><suffix>``, written atomically (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        # Directories this store made or found: a new blob's directory is asked for once, not on every put (a
        # mkdir per segment was a visible share of the worker's threads at a GPU's pace). A directory removed
        # behind its back is made again when the temp file cannot be created in it.
        self._made: set[Path] = set()

    def path_for(self, sha256: str, suffix: str) -> Path:
        return self.root / sha256[:2] / sha256[2:4] / f"{sha256}{suffix}"

    def put(self, data: bytes, suffix: str) -> AudioRef:
        """Store ``data`` under its hash. A blob already there is touched, not rewritten: its modification
        time says it is in use again, which :meth:`remove_unused` respects."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_for(digest, suffix)
        try:
            os.utime(path)  # same bytes, same name: a rewrite would change nothing
        except FileNotFoundError:
            fd, tmp = self._temp_file(path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return AudioRef(sha256=digest, uri=path.as_uri())

    def _temp_file(self, directory: Path) -> tuple[int, str]:
        if directory not in self._made:
            directory.mkdir(parents=True, exist_ok=True)
            self._made.add(directory)
        try:
            return tempfile.mkstemp(dir=directory, prefix=".tmp-")
        except FileNotFoundError:  # removed since it was made
            directory.mkdir(parents=True, exist_ok=True)
            return tempfile.mkstemp(dir=directory, prefix=".tmp-")

    def _own_path(self, ref: AudioRef) -> Path | None:
        """Where ``ref``'s blob lies in this store, or ``None`` when its URI names anything else.

        A URI comes from an event on the log, which anything that can write to the topic could have
        written: only the exact path the store itself would give the blob is taken (``file:``, under the
        root, ``ab/cd/<sha256><suffix>``, no ``..``), and only when its directories resolve under the root
        and it is no link (nothing out of the store), so that no read, touch or delete ever reaches a file
        outside the store.
        """
        parsed = urlparse(ref.uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            return None
        path = Path(unquote(parsed.path))
        match = _BLOB_NAME.fullmatch(path.name)
        if match is None or match.group(1) != ref.sha256:
            return None
        own = self.path_for(ref.sha256, match.group(2) or "")
        if path != own or os.path.realpath(own.parent) != str(own.parent) or own.is_symlink():
            return None
        return own

    def get(self, ref: AudioRef) -> bytes:
        path = self._own_path(ref)
        if path is None:
            raise BlobNotFound(f"{ref.uri} is not a blob of this store ({self.root})")
        deadline = time.monotonic() + _DOOMED_WAIT_S
        while True:
            try:
                return path.read_bytes()
            except FileNotFoundError as exc:
                # Renamed away for a moment while remove_unused decides (it puts back a blob in use):
                # wait for the decision rather than report a kept blob as gone.
                if path.with_name(f".doomed-{path.name}").exists() and time.monotonic() < deadline:
                    _pause(0.01)
                    continue
                try:
                    return path.read_bytes()  # put back between the failed read and the look for the rename
                except FileNotFoundError:
                    raise BlobNotFound(f"blob {ref.sha256} is gone") from exc

    def touch(self, refs: Iterable[AudioRef]) -> bool:
        for ref in refs:
            path = self._own_path(ref)
            if path is None:
                return False
            try:
                os.utime(path)
            except FileNotFoundError:
                return False  # deleted, or being deleted: remove_unused's rename came first
        return True

    def scan(self) -> list[StoredBlob]:
        """Every blob in the store, with its size and last use (writes in progress are not blobs yet)."""
        found = []
        for directory, _, names in os.walk(self.root):
            for name in names:
                path = Path(directory, name)
                if name.startswith(".doomed-"):
                    self._restore_abandoned(path)
                    continue
                match = _BLOB_NAME.match(name)
                if match is None:
                    continue  # a temporary file of a write in progress
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                ref = AudioRef(sha256=match.group(1), uri=path.as_uri())
                found.append(StoredBlob(ref, stat.st_size, stat.st_mtime))
        return found

    @staticmethod
    def _restore_abandoned(doomed: Path) -> None:
        """Put back a blob that a deleter renamed away and then died on (the rename changed its ctime):
        the next look decides about it again."""
        try:
            if time.time() - doomed.stat().st_ctime > _ABANDONED_S:
                kept = doomed.with_name(doomed.name.removeprefix(".doomed-"))
                if not kept.exists():
                    os.replace(doomed, kept)
                else:
                    doomed.unlink()  # written again meanwhile: the same bytes
        except FileNotFoundError:
            pass

    def remove_unused(self, ref: AudioRef, idle_s: float) -> bool:
        """Delete the blob unless it was written or touched within the last ``idle_s`` seconds.

        Safe against a writer putting the same bytes meanwhile: the blob is first renamed away
        (atomic), and put back if it turns out to be in use. A ``put`` that finds it gone writes it
        again; one that touched it first keeps it (its modification time is recent).
        """
        path = self._own_path(ref)
        if path is None:
            return False
        doomed = path.with_name(f".doomed-{path.name}")
        try:
            os.replace(path, doomed)
        except FileNotFoundError:
            return False
        if time.time() - doomed.stat().st_mtime < idle_s:
            os.replace(doomed, path)  # in use after all (identical bytes if a put raced us)
            return False
        doomed.unlink(missing_ok=True)
        return True


class ThreadedBlobShelf:
    """The store's slow operations (listing every file, deleting) run off the event loop."""

    def __init__(self, store: LocalBlobStore) -> None:
        self._store = store

    async def scan(self) -> list[StoredBlob]:
        return await asyncio.to_thread(self._store.scan)

    async def remove_unused(self, ref: AudioRef, idle_s: float) -> bool:
        return await asyncio.to_thread(self._store.remove_unused, ref, idle_s)
