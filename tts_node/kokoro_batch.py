"""One forward of Kokoro-82M (the library's ``KModel``) over a batch of segments, each as it would be alone.

``KModel.forward_with_tokens`` takes one segment: it runs its LSTMs unpacked, builds
the alignment with ``repeat_interleave`` and draws its source noise from the global
generator. ``forward_batch`` pads a batch and masks it through every layer (the
text side here, the prosody and decoder side in ``tts_node.kokoro_masked``), so an
item's audio, predicted durations and word times are the segment's own whatever
rides beside it:

- BERT reads each item under its attention mask; the duration encoder and text
  encoder take the item's length (they mask and pack by it already), and the
  duration LSTM, which the library runs unpacked, is packed here;
- the alignment comes from cumulative durations in one comparison, not a loop of
  ``repeat_interleave`` per item;
- the harmonic source's noise is drawn per item from a generator seeded by the
  segment (``segment_seed``), so a segment's audio is a function of its ids, voice,
  speed and the model, the same in any batch, on a retry and on a replay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from tts_node.kokoro_compile import EAGER, Decoding
from tts_node.kokoro_masked import Frames, decode, packed_lstm, prosody


@dataclass(frozen=True)
class BatchItem:
    """One segment of a batch: phoneme ids (without the boundary pads), its style row, speed and noise seed."""

    ids: tuple[int, ...]
    style: torch.Tensor  # [256]: the voice pack's row for this many ids
    speed: float
    seed: int


@dataclass(frozen=True)
class ItemOutput:
    """An item's audio (float32 at 24 kHz) and its predicted frames per id, the boundary pads included."""

    audio: npt.NDArray[np.float32]
    durations: list[int]


def segment_seed(ids: Sequence[int], voice: str, speed: float) -> int:
    """The noise seed of a segment: the same ids, voice and speed always draw the same noise."""
    key = f"{voice}\x1f{speed!r}\x1f{','.join(map(str, ids))}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


def samples_per_frame(model: Any) -> int:
    """Audio samples per alignment frame: the decoder doubles the frames, the generator upsamples the rest."""
    return 2 * int(model.decoder.generator.m_source.l_sin_gen.upsample_scale)


def forward_batch(model: Any, items: Sequence[BatchItem], decoding: Decoding = EAGER) -> list[ItemOutput]:
    """Each item's audio and durations from one forward of ``model`` (in inference mode, on its device), its
    decoder run by ``decoding`` (``tts_node.kokoro_compile``: eager, compiled, or CUDA graphs)."""
    if not items:
        return []
    device = model.device
    lengths = [len(item.ids) + 2 for item in items]  # id 0 pads both ends, as KModel.forward does
    width = max(lengths)
    ids = torch.zeros(len(items), width, dtype=torch.long)
    for row, item in enumerate(items):
        ids[row, 1 : 1 + len(item.ids)] = torch.tensor(item.ids, dtype=torch.long)
    ids = ids.to(device)
    tokens = Frames.of(lengths, width, device)
    padding = tokens.mask.squeeze(1) == 0
    styles = torch.stack([item.style for item in items]).to(device)
    s = styles[:, 128:]
    bert = model.bert(ids, attention_mask=(~padding).int())
    d_en = model.bert_encoder(bert).transpose(-1, -2)
    d = model.predictor.text_encoder(d_en, s, tokens.lengths, padding)
    lstm_out = packed_lstm(model.predictor.lstm, d, lengths)
    speeds = torch.tensor([item.speed for item in items], dtype=torch.float32, device=device).view(-1, 1)
    duration = torch.sigmoid(model.predictor.duration_proj(lstm_out)).sum(dim=-1) / speeds
    pred_dur = torch.round(duration).clamp(min=1).long() * (~padding)
    ends = pred_dur.cumsum(dim=1)
    frame_counts = ends[:, -1].tolist()  # the one wait on the device before the decoder's shapes are known
    frames = Frames.of(frame_counts, decoding.frames_for(max(frame_counts)), device)
    steps = torch.arange(frames.size, device=device).view(1, 1, -1)
    alignment = ((steps >= (ends - pred_dur).unsqueeze(-1)) & (steps < ends.unsqueeze(-1))).float()
    en = d.transpose(-1, -2) @ alignment
    f0, noise = prosody(model.predictor, en, s, frames)
    asr = model.text_encoder(ids, tokens.lengths, padding) @ alignment
    seeds = [item.seed for item in items]
    audio = decode(model.decoder, asr, f0, noise, styles[:, :128], frames, seeds, decoding.body)
    samples = audio.float().cpu().numpy()
    durations = pred_dur.cpu().tolist()
    per_frame = samples_per_frame(model)
    return [
        ItemOutput(samples[row, : frame_counts[row] * per_frame].copy(), durations[row][: lengths[row]])
        for row in range(len(items))
    ]
