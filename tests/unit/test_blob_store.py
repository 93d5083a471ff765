"""The blob store takes only its own paths from a URI, whatever wrote the event that carries it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from contracts import AudioRef
from foundation.blobs import BlobNotFound, LocalBlobStore


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def outside(tmp_path: Path, data: bytes = b"secret") -> tuple[Path, str]:
    """A file outside the store named as a blob of its bytes would be, and that hash."""
    sha = hashlib.sha256(data).hexdigest()
    target = tmp_path / "elsewhere" / f"{sha}.wav"
    target.parent.mkdir()
    target.write_bytes(data)
    return target, sha


def test_a_blob_put_is_read_back_by_its_own_uri(store):
    ref = store.put(b"audio", ".wav")
    assert store.get(ref) == b"audio"
    assert store.touch([ref])


def test_regression_a_blob_uri_with_dotdot_reaches_no_file_outside_the_store(store, tmp_path):
    """The path check took any URI whose third parent was the root: ``<root>/../elsewhere/x`` passed it."""
    store.put(b"audio", ".wav")  # the root exists, as in any store in use
    target, sha = outside(tmp_path)
    sneaky = AudioRef(sha256=sha, uri=f"file://{store.root}/../elsewhere/{sha}.wav")
    assert (store.root / ".." / "elsewhere" / f"{sha}.wav").resolve() == target
    with pytest.raises(BlobNotFound):
        store.get(sneaky)
    assert not store.touch([sneaky])
    assert not store.remove_unused(sneaky, idle_s=0)
    assert target.exists(), "nothing outside the store is ever deleted"


@pytest.mark.parametrize(
    "uri",
    [
        "file://{elsewhere}",  # an absolute path outside the root
        "file://{root}/{a}/{b}/../{b}/{name}",  # inside, but not the store's own spelling
        "file://{root}/zz/zz/{name}",  # another directory of the root
        "http://example.com/{name}",  # not a file
        "file://host/{root}/{a}/{b}/{name}",  # another machine's file
        "{root}/{a}/{b}/{name}",  # no scheme
    ],
)
def test_a_uri_that_is_not_the_stores_own_path_is_refused(store, tmp_path, uri):
    ref = store.put(b"audio", ".wav")
    target, _ = outside(tmp_path, b"audio")
    spelled = uri.format(
        elsewhere=target, root=store.root, a=ref.sha256[:2], b=ref.sha256[2:4], name=f"{ref.sha256}.wav"
    )
    foreign = AudioRef(sha256=ref.sha256, uri=spelled)
    with pytest.raises(BlobNotFound):
        store.get(foreign)
    assert not store.touch([foreign])


def test_a_link_out_of_the_store_is_not_followed(store, tmp_path):
    target, sha = outside(tmp_path)
    link_dir = store.root / sha[:2]
    link_dir.mkdir(parents=True)
    os.symlink(target.parent, link_dir / sha[2:4])  # ab/cd -> a directory outside
    linked = AudioRef(sha256=sha, uri=(link_dir / sha[2:4] / f"{sha}.wav").as_uri())
    with pytest.raises(BlobNotFound):
        store.get(linked)
    assert not store.remove_unused(linked, idle_s=0)
    assert target.exists()


def test_a_blobs_directory_removed_behind_the_stores_back_is_made_again(tmp_path: Path) -> None:
    """The store remembers the directories it made (one ``mkdir`` per directory, not per blob): one removed
    since, by hand or by a cleanup, is made again when a blob is next written there."""
    store = LocalBlobStore(tmp_path)
    first = store.put(b"one", ".wav")
    directory = store.path_for(first.sha256, ".wav").parent
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()
    assert store.get(store.put(b"one", ".wav")) == b"one"
