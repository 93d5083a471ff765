"""Kokoro voice packs by name, and voice specs (single voices or mixes) resolved to one pack.

A pack is a float32 array of shape (510, 1, 256): one 256-wide style vector
per phoneme count. A mix is the weighted average of its voices' packs, taken
over the *canonical* spec (``contracts.voices``), so every spelling of one
mix, which shares one fingerprint, also gives bit-identical audio.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from contracts.errors import InvalidRequest
from contracts.voices import canonical_voice, parse_voice_spec
from tts_node.errors import EngineInputError, ModelUnavailable

Pack = npt.NDArray[np.float32]

PACK_ROWS: Final = 510
STYLE_DIM: Final = 256
PACK_SHAPE: Final = (PACK_ROWS, 1, STYLE_DIM)
PACK_SUFFIXES: Final = (".npy", ".pt", ".bin")
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


class VoiceBank:
    """Immutable name -> pack mapping; packs are stored read-only and shared, never copied out."""

    def __init__(self, packs: Mapping[str, npt.ArrayLike]) -> None:
        self._packs = {name: _as_pack(np.asarray(array), f"voice {name!r}") for name, array in packs.items()}
        for name in self._packs:
            # A name outside the spec alphabet could be loaded but never asked for.
            if not name or not _NAME_CHARS.issuperset(name):
                raise ModelUnavailable(f"voice name {name!r} must be made of a-z, 0-9 and _")

    @classmethod
    def from_dir(cls, directory: Path) -> VoiceBank:
        """Packs from ``*.npy``, ``*.pt`` and ``*.bin`` files in ``directory``, named by file stem.

        ``.bin`` is raw little-endian float32, 510*256 values. Other files are ignored.
        """
        if not directory.is_dir():
            raise ModelUnavailable(f"voice directory {directory} does not exist")
        packs: dict[str, Pack] = {}
        sources: dict[str, Path] = {}
        for path in sorted(directory.iterdir()):
            if path.suffix.lower() not in PACK_SUFFIXES or not path.is_file():
                continue
            if path.stem in sources:
                raise ModelUnavailable(f"voice {path.stem!r} is defined twice: {sources[path.stem]} and {path}")
            if not path.stem or not _NAME_CHARS.issuperset(path.stem):
                raise ModelUnavailable(f"voice file {path}: the name must be made of a-z, 0-9 and _")
            packs[path.stem] = _load_file(path)
            sources[path.stem] = path
        return cls(packs)

    def merge(self, other: VoiceBank) -> VoiceBank:
        """Both banks' voices; a name in both is an error, so an extra pack never shadows a bundled one."""
        clash = sorted(set(self._packs) & set(other._packs))
        if clash:
            raise ModelUnavailable(f"voices defined twice: {', '.join(clash)}")
        return VoiceBank({**self._packs, **other._packs})

    def names(self) -> tuple[str, ...]:
        """Plain voice names, sorted; mixes of them are not listed."""
        return tuple(sorted(self._packs))

    def digest(self) -> str:
        """A hash of every voice's name and numbers: two banks that sound alike have the same one."""
        hasher = hashlib.sha256()
        for name in self.names():
            hasher.update(name.encode() + b"\0")
            hasher.update(np.ascontiguousarray(self._packs[name]).tobytes())
        return hasher.hexdigest()

    def resolve(self, spec: str) -> Pack:
        """The (510, 1, 256) pack for a voice name or mix; ``EngineInputError`` if it cannot be resolved."""
        terms = self._terms(spec)
        if len(terms) == 1:
            return self._packs[terms[0][0]]
        # float64 and a fixed (sorted) order: the same mix must give the same bytes on every node.
        total = math.fsum(weight for _, weight in terms)
        mixed = np.zeros(PACK_SHAPE, dtype=np.float64)
        for name, weight in terms:
            mixed += (weight / total) * self._packs[name].astype(np.float64)
        return mixed.astype(np.float32)

    def __contains__(self, spec: object) -> bool:
        """Whether ``spec`` is a voice name or mix this bank can resolve."""
        if not isinstance(spec, str):
            return False
        try:
            self._terms(spec)
        except EngineInputError:
            return False
        return True

    def _terms(self, spec: str) -> tuple[tuple[str, float], ...]:
        try:
            terms = parse_voice_spec(canonical_voice(spec))
        except InvalidRequest as exc:
            raise EngineInputError(str(exc)) from exc
        unknown = sorted({name for name, _ in terms if name not in self._packs})
        if unknown:
            listed = ", ".join(repr(name) for name in unknown)
            noun = "voice" if len(unknown) == 1 else "voices"
            raise EngineInputError(f"unknown {noun} {listed}; known voices: {', '.join(self.names())}")
        return terms

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._packs)


def _as_pack(array: np.ndarray, source: str) -> Pack:
    if array.shape == (PACK_ROWS, STYLE_DIM):
        array = array.reshape(PACK_SHAPE)
    if array.shape != PACK_SHAPE:
        raise ModelUnavailable(f"{source} has shape {array.shape}; expected {PACK_SHAPE} or {(PACK_ROWS, STYLE_DIM)}")
    if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
        raise ModelUnavailable(f"{source} must hold finite floating-point values, not {array.dtype} or NaN/inf")
    pack = np.array(array, dtype=np.float32, order="C")  # a private copy: callers cannot mutate it later
    pack.flags.writeable = False
    return pack


def _load_file(path: Path) -> Pack:
    try:
        suffix = path.suffix.lower()
        if suffix == ".npy":
            # No pickles: a voice file must not be able to run code.
            array = np.load(path, allow_pickle=False)
        elif suffix == ".pt":
            array = _load_torch(path)
        else:
            data = path.read_bytes()
            expected = PACK_ROWS * STYLE_DIM * 4
            if len(data) != expected:
                raise ModelUnavailable(
                    f"voice file {path} holds {len(data)} bytes; expected {expected} "
                    f"({PACK_ROWS}*{STYLE_DIM} little-endian float32 values)"
                )
            array = np.frombuffer(data, dtype="<f4")
            array = array.reshape(PACK_ROWS, STYLE_DIM)
    except ModelUnavailable:
        raise
    except Exception as exc:
        raise ModelUnavailable(f"cannot read voice file {path}: {exc}") from exc
    return _as_pack(array, f"voice file {path}")


def _load_torch(path: Path) -> np.ndarray:
    # Imported here: torch takes seconds to import and only .pt packs need it.
    import torch

    # weights_only: a .pt file is a pickle, and only tensors may come out of it.
    value = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(value, torch.Tensor):
        raise ModelUnavailable(f"voice file {path} holds a {type(value).__name__}, not a tensor")
    return value.detach().to(torch.float32).numpy()


def model_version(weights_sha256: str, extra: VoiceBank | None) -> str:
    """The version a model announces and requests are fingerprinted with: its weights, and the extra voice
    packs it was given (the same name could be another pack elsewhere). Workers of one version are
    interchangeable: they form one consumer group, and any of them may serve any of its jobs."""
    version = weights_sha256[:16]
    return f"{version}+v{extra.digest()[:8]}" if extra is not None and len(extra) else version
