"""Fixtures the unit tests of several modules share: the engines of the real architecture, each loaded once.

Writing the random Kokoro checkpoint (328 MB, the real architecture) and loading an engine take seconds
each, several times that in the CI beside two other sessions (issue 38, item 6). The torch engine's tests,
the batched forward's and the device check's read one random checkpoint, and nothing reaches the Hugging
Face hub while it is written or loaded; the kokoro-onnx engine's, SSML's, the voices', the node server's
and its queue's tests share one loaded real model. None of them changes the engine it is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The checkpoint's seed, voices and duration head: about 3.3 frames a phoneme, as in speech, so that items of
# mixed lengths make audio of mixed lengths at the cost of a real sentence (not the untrained maximum).
RANDOM_KOKORO: dict[str, Any] = {"seed": 3, "voices": ("af_one", "am_two"), "frames_per_phoneme": 3.3}


def _no_download(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"hf_hub_download called: {args} {kwargs}")


@contextlib.contextmanager
def hub_offline(hf_home: Path) -> Iterator[None]:
    """The Hugging Face hub switched off, an empty cache at ``hf_home``, and kokoro's download made to fail."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(hf_home))
        mp.delenv("HF_HUB_CACHE", raising=False)
        import kokoro.model

        mp.setattr(kokoro.model, "hf_hub_download", _no_download)
        yield


@pytest.fixture(scope="session")
def kokoro_onnx_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model cache the session's kokoro-onnx engine assembled its weights into."""
    return tmp_path_factory.mktemp("kokoro_onnx_models")


@pytest.fixture(scope="session")
def kokoro_onnx(kokoro_onnx_models: Path) -> Any:
    """The real model (kokoro-onnx int8 on two threads, every speed: ``load_engine``'s), loaded once."""
    from tts_node import load_engine

    return load_engine("kokoro-onnx", threads=2, cache_dir=kokoro_onnx_models)


@pytest.fixture(scope="session")
def random_kokoro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's random-initialized Kokoro checkpoint (``RANDOM_KOKORO``), read only."""
    from tts_node.random_checkpoint import write_random_checkpoint  # torch: imported by the tests that need it

    with hub_offline(tmp_path_factory.mktemp("hf_home")):
        return write_random_checkpoint(tmp_path_factory.mktemp("random_kokoro") / "model", **RANDOM_KOKORO)


@pytest.fixture(scope="session")
def random_kokoro_engine(random_kokoro: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The torch engine on ``random_kokoro`` (two threads), loaded once for the session."""
    from tts_node import load_engine

    with hub_offline(tmp_path_factory.mktemp("hf_home")):
        return load_engine("kokoro", model_dir=random_kokoro, threads=2)
