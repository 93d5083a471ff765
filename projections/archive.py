"""The jobs topic's older records in compressed files, so that the topic's retention can be bounded.

An archive is a directory: one gzip'd JSON-lines file per partition and run of
``voxlog archive`` (each line a record: offset, timestamp, key, headers and value,
bytes kept exactly), and ``manifest.json``, which lists every file with its
partition, offset range ``[first, end)``, record count and sha256. The manifest is
replaced atomically after the files are written, so a crash mid-run leaves the
previous manifest, which names only complete files.

Replay reads a partition's archived records, then the topic from where the archive
ends; it refuses an archive whose files do not join up, whose checksum does not
match, or that ends before the topic begins (records deleted before they were
archived). Only the jobs topic is archived: the control topic is compacted, and so
bounded already.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from projections.errors import ProjectionError

MANIFEST: Final = "manifest.json"
FORMAT: Final = 1


class ArchiveError(ProjectionError):
    """An archive that cannot be used as it is: altered, incomplete, or not of this topic."""


@dataclass(frozen=True)
class ArchivedRecord:
    offset: int
    timestamp: int  # ms since the epoch, as the log had it
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class ArchiveFile:
    file: str
    partition: int
    first: int
    end: int  # exclusive
    records: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    topic: str
    files: tuple[ArchiveFile, ...] = ()

    @classmethod
    def load(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ArchiveError(f"{directory} is not an archive: no {MANIFEST}") from exc
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"{path} cannot be read: {exc}") from exc
        if raw.get("format") != FORMAT:
            raise ArchiveError(f"{path}: archive format {raw.get('format')!r}, this voxlog reads {FORMAT}")
        return cls(raw["topic"], tuple(ArchiveFile(**f) for f in raw["files"]))

    def save(self, directory: Path) -> None:
        body = {"format": FORMAT, "topic": self.topic, "files": [asdict(f) for f in self.files]}
        _write_atomically(directory / MANIFEST, json.dumps(body, indent=1).encode())

    def of_partition(self, partition: int) -> list[ArchiveFile]:
        """The partition's files in offset order, checked to join up."""
        files = sorted((f for f in self.files if f.partition == partition), key=lambda f: f.first)
        for before, after in itertools.pairwise(files):
            if before.end != after.first:
                raise ArchiveError(
                    f"archive of {self.topic} partition {partition} has a gap or overlap: {before.file} ends at"
                    f" offset {before.end}, {after.file} begins at {after.first}"
                )
        return files

    def end(self, partition: int) -> int | None:
        """The offset after the partition's last archived record (None: nothing archived)."""
        files = self.of_partition(partition)
        return files[-1].end if files else None

    def partitions(self) -> set[int]:
        return {f.partition for f in self.files}


def write_file(directory: Path, topic: str, partition: int, first: int, records: list[ArchivedRecord]) -> ArchiveFile:
    """One partition's records from offset ``first`` on, as a compressed file; the entry the manifest will hold."""
    end = records[-1].offset + 1
    lines = b"".join(json.dumps(_line(r), separators=(",", ":")).encode() + b"\n" for r in records)
    data = gzip.compress(lines, compresslevel=6, mtime=0)
    name = f"{topic}-{partition:03d}-{first:012d}-{end:012d}.jsonl.gz"
    _write_atomically(directory / name, data)
    return ArchiveFile(name, partition, first, end, len(records), hashlib.sha256(data).hexdigest())


def read_file(directory: Path, entry: ArchiveFile) -> Iterator[ArchivedRecord]:
    """The file's records, once its checksum, count and offsets match the manifest."""
    try:
        data = (directory / entry.file).read_bytes()
    except OSError as exc:
        raise ArchiveError(f"archive file {entry.file} cannot be read: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise ArchiveError(
            f"archive file {entry.file} does not match its checksum (manifest {entry.sha256[:16]}…, file"
            f" {digest[:16]}…): it was altered or damaged; restore it from a copy"
        )
    records = [_record(json.loads(line)) for line in gzip.decompress(data).splitlines()]
    offsets = [r.offset for r in records]
    if (
        len(records) != entry.records
        or offsets != sorted(offsets)
        or offsets[0] < entry.first
        or offsets[-1] >= entry.end
    ):
        raise ArchiveError(f"archive file {entry.file} does not hold the records its manifest entry names")
    return iter(records)


def _line(record: ArchivedRecord) -> dict[str, Any]:
    line: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
    line.update(_bytes("key", record.key))
    line["headers"] = [[name, base64.b64encode(value).decode()] for name, value in record.headers]
    line.update(_bytes("value", record.value))
    return line


def _bytes(name: str, value: bytes | None) -> dict[str, str | None]:
    """Text when the bytes are UTF-8 (readable with zcat), base64 otherwise: either way, the bytes exactly."""
    if value is None:
        return {name: None}
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(value).decode()}


def _unbytes(line: dict[str, Any], name: str) -> bytes | None:
    if f"{name}_b64" in line:
        return base64.b64decode(line[f"{name}_b64"])
    text = line[name]
    return None if text is None else str(text).encode("utf-8")


def _record(line: dict[str, Any]) -> ArchivedRecord:
    headers = tuple((name, base64.b64decode(value)) for name, value in line["headers"])
    return ArchivedRecord(line["offset"], line["timestamp"], _unbytes(line, "key"), _unbytes(line, "value"), headers)


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".partial")
    with temporary.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
