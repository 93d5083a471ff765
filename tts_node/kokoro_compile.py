"""Kokoro's decoder eager, compiled by ``torch.compile``, or replayed from bucketed CUDA graphs.

The decoder (iSTFTNet) is most of a forward's time: 73% of a batch of sentences
and 83% of document parts on an H200. It is a long chain of small element-wise
operations (instance norms, Snake activations, masks) between convolutions, the
kind of code a compiler fuses and CUDA graphs launch at once. What is compiled is
``kokoro_masked.decode_body``, the decoder's and the generator's convolution stacks:
tensors in, tensors out, nothing read back from the device inside. The harmonic
source (each item's random numbers, drawn from its seed) and the STFTs on either
side stay eager: torch's compiler does not take ``torch.stft`` over dynamic
shapes, and they are a small part of the time.

- ``eager``: the library's modules, masked (``tts_node.kokoro_masked``).
- ``compile``: ``torch.compile`` (inductor), shapes dynamic: a compilation for each
  range of sizes the compiler's code guards on (one segment or several; frames
  under or over a few thresholds), all made at start-up by :meth:`CompiledDecoding.warm`.
- ``graphs``: the same with ``mode="reduce-overhead"``, which on CUDA records a
  graph for each shape it meets; a batch's frames are padded up to a bucket (eight
  to an octave: at most 12.5% more frames, which the masks make silent), so a
  worker meets tens of shapes, not thousands.

A compiled decoder that fails (a compiler error, an unsupported operation) logs it
once and hands every later forward to the eager path: the fallback. Running out of
device memory is not a failure of the compiler and is raised, as the eager path
would (``tts_node.batch_sizing`` relies on it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import torch

from tts_node.kokoro_masked import Body, Frames, decode_body, source_spectrum

COMPILE_MODES: Final = ("eager", "compile", "graphs")
BUCKETS_PER_OCTAVE: Final = 8
RECOMPILE_LIMIT: Final = 64
_log = logging.getLogger(__name__)


class Decoding(Protocol):
    """How a forward runs the decoder: its frames' padded size, and its body (``kokoro_masked.Body``)."""

    @property
    def mode(self) -> str: ...

    def frames_for(self, longest: int) -> int:
        """The padded frame count of a batch whose longest item has ``longest`` frames."""
        ...

    @property
    def body(self) -> Body: ...


class EagerDecoding:
    """The library's modules, masked, run as they are."""

    mode = "eager"
    body: Body = staticmethod(decode_body)

    def frames_for(self, longest: int) -> int:
        return longest


EAGER: Final = EagerDecoding()


class CompiledDecoding:
    """``decode_body`` under ``torch.compile`` (``graphs``: CUDA graphs over bucketed frames), eager after a
    failure. ``backend`` is inductor in service; tests trace with torch's ``eager`` backend (no code made)."""

    def __init__(self, decoder: Any, mode: str, *, backend: str | Callable[..., Any] = "inductor") -> None:
        if mode not in ("compile", "graphs"):
            raise ValueError(f"a compiled decoder is 'compile' or 'graphs', not {mode!r}")
        self._mode = mode
        self._graphs = mode == "graphs"
        # CUDA graphs are inductor's (mode="reduce-overhead"); another backend (a test's) compiles as asked.
        compile_mode = "reduce-overhead" if self._graphs and backend == "inductor" else None
        # Past this many graphs of one function torch stops compiling it and runs it uncompiled, silently: a
        # device's thresholds times one-or-several segments are more than its default 8 (six on this CPU for one
        # segment), and each is compiled once, at the warm-up. The setting is the process's: its one model's.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        self._compiled = torch.compile(_DecoderBody(decoder), dynamic=True, mode=compile_mode, backend=backend)
        self.failure: str | None = None

    @property
    def mode(self) -> str:
        """What runs now: the mode asked for, or ``eager`` once it failed."""
        return "eager" if self.failure is not None else self._mode

    def frames_for(self, longest: int) -> int:
        return frame_bucket(longest) if self._graphs and self.failure is None else longest

    @property
    def body(self) -> Body:
        return self._body

    def _body(
        self,
        decoder: Any,
        asr: torch.Tensor,
        f0: torch.Tensor,
        noise: torch.Tensor,
        s: torch.Tensor,
        frames: Frames,
        har: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The compiled body's spectrum; after a failure, the eager body's (``frames`` bucketed or not, the
        masks make it the same)."""
        if self.failure is None:
            spectrum = self._run_or_fail(asr, f0, noise, s, frames.lengths, har)
            if spectrum is not None:
                return spectrum
        return decode_body(decoder, asr, f0, noise, s, frames, har)

    def warm(self, decoder: Any, batches: Sequence[int], most_frames: int, device: torch.device) -> int:
        """Compile now, not under a request: the decoder's body on silent inputs of each of ``batches`` and a
        doubling ladder of frame counts up to ``most_frames``. Torch's compiler guards on a size against
        thresholds of the code it made (on this CPU at 9, 18, 34, 39 and 204 frames, and for a batch of one), and a
        shape past one is a new compilation, seconds to a minute that every claim would wait behind. Returns the
        shapes run; with the decoder failed, none."""
        ran = 0
        frames = 8
        ladder = []
        while frames < most_frames:
            ladder.append(frames)
            frames *= 2
        ladder.append(self.frames_for(most_frames))
        for size in ladder:
            for batch in batches:
                if self.failure is not None:
                    return ran
                self._warm_one(decoder, batch, size, device)
                ran += 1
        return ran

    def _warm_one(self, decoder: Any, batch: int, size: int, device: torch.device) -> None:
        frames = Frames.of([size] * batch, size, device)
        asr = torch.zeros(batch, decoder.asr_res[0].in_channels, size, device=device)
        # F0 and noise curves apart: the compiler guards on which inputs alias each other, too.
        f0, noise = (torch.zeros(batch, 2 * size, device=device) for _ in range(2))
        s = torch.zeros(batch, decoder.encode.norm1.fc.in_features, device=device)
        har, _ = source_spectrum(decoder.generator, f0, frames, list(range(batch)))
        self._run_or_fail(asr, f0, noise, s, frames.lengths, har)

    def _run_or_fail(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The compiled body's spectrum, or None once it failed: the eager path serves from then on. Out of
        device memory is raised, as eager would raise it."""
        try:
            return self._run(*inputs)
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # the compiler's, whatever its type (BackendCompilerFailed, an unsupported op)
            self.failure = f"{type(exc).__name__}: {exc}"
            _log.warning("the %s decoder failed; eager from now on: %s", self._mode, self.failure, exc_info=exc)
            return None

    def _run(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The compiled :class:`_DecoderBody` on ``inputs``, its arguments in its order."""
        if self._graphs:
            # A new step: the last replay's outputs (already read by then) may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        spec, phase = self._compiled(*(_packed(t) for t in inputs))
        return (spec.clone(), phase.clone()) if self._graphs else (spec, phase)


class _DecoderBody(torch.nn.Module):
    """``decode_body`` as a module of plain tensors: every item masked (the library's unmasked kernels for a
    lone full item would be one more graph, for no gain once compiled)."""

    def __init__(self, decoder: Any) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(
        self,
        asr: torch.Tensor,
        f0: torch.Tensor,
        noise: torch.Tensor,
        s: torch.Tensor,
        lengths: torch.Tensor,
        har: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        size = asr.shape[-1]
        mask = (torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]).float().unsqueeze(1)
        return decode_body(self.decoder, asr, f0, noise, s, Frames((), lengths, mask, full=False), har)


def _packed(t: torch.Tensor) -> torch.Tensor:
    """``t`` laid out row-major, whatever view the caller holds (a style row's half, a squeezed curve): the
    compiler guards on strides, and a warmed shape must be the shape a forward meets. (``contiguous`` keeps a
    view whose odd stride is a size-1 dimension's.)"""
    expected, step = [], 1
    for size in reversed(t.shape):
        expected.append(step)
        step *= size
    return t if t.stride() == tuple(reversed(expected)) else t.clone(memory_format=torch.contiguous_format)


def frame_bucket(frames: int) -> int:
    """``frames`` rounded up to one of ``BUCKETS_PER_OCTAVE`` sizes an octave (16 and under: to a multiple of
    2): at most an eighth more, and a few dozen sizes from a word to a document part."""
    if frames <= 16:
        return frames + frames % 2
    step = 2 ** (math.floor(math.log2(frames)) - int(math.log2(BUCKETS_PER_OCTAVE)))
    return -(-frames // step) * step


def decoding_for(decoder: Any, mode: str) -> Decoding:
    """The decoding ``mode`` names (one of ``COMPILE_MODES``) for ``decoder``."""
    if mode == "eager":
        return EAGER
    return CompiledDecoding(decoder, mode)
