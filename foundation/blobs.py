"""Content-addressed blob store for segment audio: events carry the hash and URI, never samples."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from contracts import AudioRef
from foundation.errors import FoundationError


class BlobNotFound(FoundationError):
    """No blob has that hash (it expired, or the store is not the one that wrote it)."""


class BlobStore(Protocol):
    def put(self, data: bytes, suffix: str) -> AudioRef: ...

    def get(self, ref: AudioRef) -> bytes: ...


class LocalBlobStore:
    """Blobs in a directory as ``ab/cd/<sha256><suffix>``, written atomically (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

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
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
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

    def get(self, ref: AudioRef) -> bytes:
        path = Path(unquote(urlparse(ref.uri).path))
        if path.parent.parent.parent != self.root or not path.name.startswith(ref.sha256):
            raise BlobNotFound(f"{ref.uri} is not a blob of this store ({self.root})")
        try:
            return path.read_bytes()
        except FileNotFoundError as exc:
            raise BlobNotFound(f"blob {ref.sha256} is gone") from exc

    def remove_unused(self, ref: AudioRef, idle_s: float) -> bool:
        """Delete the blob unless it was written or touched within the last ``idle_s`` seconds.

        Safe against a writer putting the same bytes meanwhile: the blob is first renamed away
        (atomic), and put back if it turns out to be in use. A ``put`` that finds it gone writes it
        again; one that touched it first keeps it (its modification time is recent).
        """
        path = Path(unquote(urlparse(ref.uri).path))
        if path.parent.parent.parent != self.root or not path.name.startswith(ref.sha256):
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
