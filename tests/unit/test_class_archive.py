"""The Kafka JVM's class archive (``infra.class_archive``): written by the first JVM started without one, at its
exit, promoted once that JVM is gone, then mapped by every later start."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from foundation.settings import default_cache_root
from infra.class_archive import ClassArchive
from infra.kafka_broker import KafkaBroker, KafkaBrokerConfig

JAVA = shutil.which("java")


@pytest.fixture
def java(tmp_path: Path) -> str:
    binary = tmp_path / "java"
    binary.write_text("#!/bin/sh\n")
    return str(binary)


def _broker(home: Path) -> KafkaBroker:
    jars = default_cache_root() / "kafka"
    return KafkaBroker(KafkaBrokerConfig(home=home, port=1, controller_port=2, heap="256m", jar_cache=jars))


def _exited_process() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_jvm_writes_the_archive_when_there_is_none_and_nobody_writes_one(tmp_path, java):
    archive = ClassArchive(tmp_path, java)
    flags, pending = archive.flags(write=True)
    assert pending is not None
    assert pending.parent == tmp_path
    assert flags == [f"-XX:ArchiveClassesAtExit={pending}"]
    ClassArchive.written_by(pending, os.getpid())  # a writer still running: no second one
    assert archive.flags(write=True) == ([], None)
    assert archive.flags(write=False) == ([], None)


def _written(archive: ClassArchive, content: bytes) -> Path:
    """A JVM started to write the archive, which wrote ``content`` and exited."""
    _, pending = archive.flags(write=True)
    assert pending is not None
    pending.write_bytes(content)
    ClassArchive.written_by(pending, _exited_process())
    return pending


def test_a_pending_archive_is_promoted_once_its_writer_has_exited(tmp_path, java):
    archive = ClassArchive(tmp_path, java)
    _written(archive, b"classes")
    flags, again = archive.flags(write=True)
    assert again is None
    assert flags == [f"-XX:SharedArchiveFile={archive.path}", "-Xshare:auto"]
    assert archive.path.read_bytes() == b"classes"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["java", archive.path.name])


def test_a_writer_that_wrote_nothing_is_forgotten_and_the_next_start_writes_again(tmp_path, java):
    """A broker killed with SIGKILL writes no archive (and a crash may leave an empty file)."""
    archive = ClassArchive(tmp_path, java)
    pending = _written(archive, b"")
    _, second = archive.flags(write=True)
    assert second is not None
    assert second != pending
    assert not pending.exists()
    assert not archive.path.exists()


def test_the_archive_is_named_by_the_java_binary(tmp_path, java):
    other = tmp_path / "other-java"
    other.write_text("#!/bin/sh\n# another build\n")
    assert ClassArchive(tmp_path, java).path != ClassArchive(tmp_path, str(other)).path


def test_only_a_broker_start_writes_the_archive(tmp_path):
    broker = _broker(tmp_path)
    for argv in (broker.java_argv("kafka.Kafka"), broker.java_argv("kafka.tools.StorageTool", tool=True)):
        assert not any(flag.startswith("-XX:ArchiveClassesAtExit") for flag in argv)


@pytest.mark.slow
@pytest.mark.skipif(JAVA is None, reason="no JDK")
def test_a_real_jvm_writes_an_archive_that_the_next_one_maps(tmp_path):
    """The JDK's own dynamic archive, of a Kafka tool's classes: ``-Xshare:on`` fails a JVM that cannot map it."""
    assert JAVA is not None
    broker = _broker(tmp_path)
    classpath = f"{broker.jars_dir()}/*"
    archive = ClassArchive(tmp_path, JAVA)
    flags, pending = archive.flags(write=True)
    assert pending is not None
    tool = [JAVA, "-Xmx128m", "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"]
    writer = subprocess.Popen([tool[0], *flags, *tool[1:]], stdout=subprocess.DEVNULL)
    ClassArchive.written_by(pending, writer.pid)
    assert writer.wait(timeout=120) == 0
    flags, _ = archive.flags(write=True)
    assert archive.path.exists()
    mapped = subprocess.run(
        [tool[0], *flags, "-Xshare:on", "-Xlog:class+load=info", *tool[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert mapped.returncode == 0, mapped.stdout[-2000:] + mapped.stderr[-2000:]
    assert "kafka.tools.StorageTool source: shared objects file (top)" in mapped.stdout
