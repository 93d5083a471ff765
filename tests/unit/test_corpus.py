"""The corpus copy in tests/corpus is the shared corpus, wherever both are present."""

from __future__ import annotations

import pytest

from voxlog.corpus import COPIED_CORPUS, SHARED_CORPUS


def test_the_committed_copy_is_the_shared_corpus():
    if not SHARED_CORPUS.is_dir():
        pytest.skip("no shared corpus beside this checkout: the copy is all there is")
    shared = {p.name: p.read_bytes() for p in SHARED_CORPUS.iterdir() if p.is_file()}
    copied = {p.name: p.read_bytes() for p in COPIED_CORPUS.iterdir() if p.is_file()}
    assert copied == shared, "copy ../shared/corpus into tests/corpus again"
