"""A class-data-sharing archive of the Kafka broker's classes: a JVM maps them instead of loading them anew.

A broker's start is mostly loading and verifying classes. Measured here, a broker took 2.2 to 2.8 CPU-s to
answer its first metadata request, and 1.4 with the archive (and answered a second sooner); the test suite
starts one about 25 times (the fault campaigns, the outages, the cluster), ``voxlog dev up`` once a session.

The archive is a JDK dynamic archive (JDK 13+), which a JVM writes when it exits
(``-XX:ArchiveClassesAtExit``): the first broker started without one writes it into a pending file of its
own, and a later start promotes that file to the archive once its writer has exited (a broker killed with
SIGKILL writes nothing, and the next one tries again). It is valid for one JDK and one class path only, so it
is named by the java binary and kept in the jar directory of the Kafka version; a JVM that cannot map it
anyway starts as before (``-Xshare:auto``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.processes import pid_alive


@dataclass(frozen=True)
class ClassArchive:
    directory: Path  # the jar directory of one Kafka version
    java: str  # the java binary

    @property
    def path(self) -> Path:
        binary = Path(self.java).resolve()
        stat = binary.stat()
        digest = hashlib.sha256(f"{binary}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
        return self.directory / f"classes-{digest}.jsa"

    def flags(self, *, write: bool) -> tuple[list[str], Path | None]:
        """The JVM's flags: map the archive, or (none yet, ``write``, and no JVM writing one) write it at exit.
        The second value is then the pending file: give :meth:`written_by` the pid of the JVM that writes it."""
        archive = self.path
        self._promote(archive)
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"], None
        if not write or any(pid_alive(pid) for pid in self._writers(archive).values()):
            return [], None
        pending = self.directory / f"{archive.stem}.{uuid.uuid4().hex}.pending"
        return [f"-XX:ArchiveClassesAtExit={pending}"], pending

    @staticmethod
    def written_by(pending: Path, pid: int) -> None:
        pending.with_suffix(".pid").write_text(f"{pid}\n")

    def _writers(self, archive: Path) -> dict[Path, int]:
        """Each pending file's writer, by its pid file."""
        writers = {}
        for pid_file in self.directory.glob(f"{archive.stem}.*.pid"):
            with contextlib.suppress(OSError, ValueError):  # gone meanwhile, or being written
                writers[pid_file] = int(pid_file.read_text())
        return writers

    def _promote(self, archive: Path) -> None:
        """A pending file whose JVM has exited becomes the archive (an empty one, or none, is dropped)."""
        for pid_file, pid in self._writers(archive).items():
            if pid_alive(pid):
                continue
            pending = pid_file.with_suffix(".pending")
            with contextlib.suppress(OSError):  # another process promoted or dropped it first
                if pending.stat().st_size > 0 and not archive.exists():
                    os.replace(pending, archive)
            pending.unlink(missing_ok=True)
            pid_file.unlink(missing_ok=True)
