"""The text corpus that tests and benchmarks speak, so that figures compare from run to run.

``$VOXLOG_CORPUS`` when set; else the project's shared corpus beside the
checkout (``../shared/corpus``); else the copy committed in ``tests/corpus``
(a clone elsewhere has no shared folder beside it; a test checks that the
copy equals the shared corpus wherever both exist).
"""

from __future__ import annotations

import os
from pathlib import Path

from voxlog.devstack import SOURCE_ROOT

SHARED_CORPUS = SOURCE_ROOT.parent / "shared" / "corpus"
COPIED_CORPUS = SOURCE_ROOT / "tests" / "corpus"


def corpus_dir() -> Path:
    if "VOXLOG_CORPUS" in os.environ:
        return Path(os.environ["VOXLOG_CORPUS"])
    return SHARED_CORPUS if SHARED_CORPUS.is_dir() else COPIED_CORPUS
