"""The archive's files and manifest (projections.archive): bytes kept exactly, damage and gaps refused."""

from __future__ import annotations

import gzip
import json

import pytest

from projections.archive import ArchivedRecord, ArchiveError, ArchiveFile, Manifest, read_file, write_file

RECORDS = [
    ArchivedRecord(
        5, 1_700_000_000_000, b"f" * 64, b'{"type":"JobQueued","text":"caf\xc3\xa9"}', (("type", b"JobQueued"),)
    ),
    ArchivedRecord(6, 1_700_000_000_001, b"poison", b"\xff\xfe not utf-8", ()),
    ArchivedRecord(7, 1_700_000_000_002, None, None, (("bin", b"\x00\x01"),)),
]


def test_records_come_back_byte_for_byte_and_text_stays_readable(tmp_path):
    entry = write_file(tmp_path, "voxlog.jobs", 3, 5, RECORDS)
    assert (entry.partition, entry.first, entry.end, entry.records) == (3, 5, 8, 3)
    assert list(read_file(tmp_path, entry)) == RECORDS
    first_line = json.loads(gzip.decompress((tmp_path / entry.file).read_bytes()).splitlines()[0])
    assert first_line["value"] == '{"type":"JobQueued","text":"café"}', "readable with zcat"


def test_a_file_that_does_not_match_its_checksum_is_refused(tmp_path):
    entry = write_file(tmp_path, "voxlog.jobs", 0, 5, RECORDS)
    path = tmp_path / entry.file
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="does not match its checksum"):
        read_file(tmp_path, entry)


def test_a_manifest_entry_that_names_other_records_is_refused(tmp_path):
    entry = write_file(tmp_path, "voxlog.jobs", 0, 5, RECORDS)
    with pytest.raises(ArchiveError, match="does not hold the records"):
        read_file(tmp_path, ArchiveFile(entry.file, 0, 5, 8, 4, entry.sha256))


def test_the_manifest_round_trips_and_refuses_files_that_do_not_join_up(tmp_path):
    a = ArchiveFile("a", 1, 0, 10, 10, "0" * 64)
    b = ArchiveFile("b", 1, 12, 20, 8, "0" * 64)
    Manifest("voxlog.jobs", (b, a)).save(tmp_path)
    loaded = Manifest.load(tmp_path)
    assert loaded.partitions() == {1}
    with pytest.raises(ArchiveError, match="a ends at offset 10, b begins at 12"):
        loaded.of_partition(1)
    assert Manifest("voxlog.jobs", (a,)).end(1) == 10
    assert Manifest("voxlog.jobs", (a,)).end(2) is None


def test_a_directory_without_a_manifest_is_not_an_archive(tmp_path):
    with pytest.raises(ArchiveError, match="is not an archive"):
        Manifest.load(tmp_path)
