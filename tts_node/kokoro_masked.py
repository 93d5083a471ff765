"""Kokoro's decoder-side modules run on a padded batch so that each item equals the item alone.

Every function here takes the library's own module (its weights, its hooks) and a
``Frames`` mask, and recomputes the module's ``forward`` with the padding taken
out of every operation that would otherwise read it:

- instance norms (AdaIN) take their mean and variance over an item's own frames;
- convolutions see zeros past an item's end, as its own zero padding would give
  it alone (every convolution's output is masked again, its bias included);
- LSTMs are packed, so the backward direction starts at an item's own last frame;
- the harmonic source's phase and STFT see an item's end as the item alone does
  (edge-held phase, reflected samples), and the inverse STFT's window envelope
  counts an item's own frames only.

Activations used between these (leaky ReLU, Snake) keep zeros zero, so a masked
tensor stays masked through them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # torch's own convention

# AdainResBlk1d scales its sum by torch.rsqrt(torch.tensor(2)): the same float32 value.
_RSQRT2 = float(torch.rsqrt(torch.tensor(2.0)))


@dataclass(frozen=True)
class Frames:
    """Per-item lengths of a padded ``[B, C, T]`` batch, and the ``[B, 1, T]`` mask of its real frames."""

    counts: tuple[int, ...]  # each item's frames, on the host: no wait on the device to read them
    lengths: torch.Tensor  # the same, [B] long, on the batch's device
    mask: torch.Tensor  # [B, 1, T] float: 1 on an item's frames, 0 past its end
    full: bool  # no item ends before T (a batch of one): nothing to mask, the library's own kernels serve

    @classmethod
    def of(cls, counts: Sequence[int], size: int, device: torch.device) -> Frames:
        lengths = torch.tensor(list(counts), dtype=torch.long, device=device)
        return cls(tuple(counts), lengths, _mask(lengths, size), all(count == size for count in counts))

    def scaled(self, factor: int, extra: int = 0) -> Frames:
        """The same items at ``factor`` times the time resolution (plus ``extra`` frames each)."""
        lengths = self.lengths * factor + extra
        counts = tuple(count * factor + extra for count in self.counts)
        return Frames(counts, lengths, _mask(lengths, self.size * factor + extra), self.full)

    def clip(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with every item's frames past its end zeroed."""
        return x if self.full else x * self.mask

    @property
    def size(self) -> int:
        return int(self.mask.shape[-1])


def packed_lstm(lstm: torch.nn.LSTM, x: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """``lstm`` over ``[B, T, C]`` with each item read up to its own length; zeros past it."""
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        x, torch.tensor(list(lengths), dtype=torch.long), batch_first=True, enforce_sorted=False
    )
    lstm.flatten_parameters()
    out, _ = lstm(packed)
    padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return padded


def adain(module: Any, x: torch.Tensor, s: torch.Tensor, frames: Frames) -> torch.Tensor:
    """``AdaIN1d``: an instance norm over each item's own frames, styled by ``s``; masked."""
    if frames.full:
        return module(x, s)
    h = module.fc(s)
    gamma, beta = torch.chunk(h.view(h.size(0), h.size(1), 1), chunks=2, dim=1)
    norm = module.norm
    count = frames.lengths.to(x.dtype).view(-1, 1, 1)
    mean = (x * frames.mask).sum(dim=-1, keepdim=True) / count
    centred = (x - mean) * frames.mask
    var = (centred * centred).sum(dim=-1, keepdim=True) / count
    normed = centred * torch.rsqrt(var + norm.eps)
    if norm.affine:
        normed = normed * norm.weight.view(1, -1, 1) + norm.bias.view(1, -1, 1)
    return ((1 + gamma) * normed + beta) * frames.mask


def adain_resblk(block: Any, x: torch.Tensor, s: torch.Tensor, frames: Frames) -> tuple[torch.Tensor, Frames]:
    """``AdainResBlk1d`` (prosody and decoder): returns the output and its frames (doubled when it upsamples)."""
    out = block.actv(adain(block.norm1, x, s, frames))
    out_frames = frames
    if block.upsample_type != "none":
        out_frames = frames.scaled(2)
        out = out_frames.clip(block.pool(out))
    out = out_frames.clip(block.conv1(out))
    out = block.actv(adain(block.norm2, out, s, out_frames))
    out = out_frames.clip(block.conv2(out))
    shortcut = out_frames.clip(block._shortcut(x))
    return (out + shortcut) * _RSQRT2, out_frames


def snake_resblock(block: Any, x: torch.Tensor, s: torch.Tensor, frames: Frames) -> torch.Tensor:
    """``AdaINResBlock1`` (the generator's): Snake activations between masked convolutions."""
    layers = zip(block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True)
    for c1, c2, n1, n2, a1, a2 in layers:
        xt = adain(n1, x, s, frames)
        xt = xt + (1 / a1) * (torch.sin(a1 * xt) ** 2)
        xt = frames.clip(c1(xt))
        xt = adain(n2, xt, s, frames)
        xt = xt + (1 / a2) * (torch.sin(a2 * xt) ** 2)
        xt = frames.clip(c2(xt))
        x = xt + x
    return x


def prosody(predictor: Any, en: torch.Tensor, s: torch.Tensor, frames: Frames) -> tuple[torch.Tensor, torch.Tensor]:
    """``ProsodyPredictor.F0Ntrain``: F0 and noise curves ``[B, 2T]`` from aligned features ``[B, C, T]``."""
    x = packed_lstm(predictor.shared, en.transpose(-1, -2), frames.counts).transpose(-1, -2)
    curves = []
    for blocks, projection in ((predictor.F0, predictor.F0_proj), (predictor.N, predictor.N_proj)):
        y, y_frames = x, frames
        for block in blocks:
            y, y_frames = adain_resblk(block, y, s, y_frames)
        curves.append(y_frames.clip(projection(y)).squeeze(1))
    return curves[0], curves[1]


@dataclass(frozen=True)
class SourceDraws:
    """The random numbers the harmonic source takes for a batch, each item's drawn from its own seed."""

    initial: torch.Tensor  # [B, harmonics]: initial phases (the fundamental's is 0)
    noise: torch.Tensor  # [B, L, harmonics]: zero past an item's own samples


Body = Callable[
    [Any, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Frames, torch.Tensor],
    tuple[torch.Tensor, torch.Tensor],
]
"""How the decoder's body runs (:func:`decode_body`, or compiled: ``tts_node.kokoro_compile``)."""


def decode(
    decoder: Any,
    asr: torch.Tensor,
    f0: torch.Tensor,
    noise: torch.Tensor,
    s: torch.Tensor,
    frames: Frames,
    seeds: Sequence[int],
    body: Body | None = None,
) -> torch.Tensor:
    """``Decoder.forward`` on ``[B, C, T]`` features and ``[B, 2T]`` curves: ``[B, samples]`` audio, zero past an
    item's end. ``seeds`` fix each item's harmonic-source noise; ``body`` runs the convolution stacks between the
    source's spectrum and the inverse STFT (:func:`decode_body` unless given)."""
    har, spec_frames = source_spectrum(decoder.generator, f0, frames, seeds)
    spec, phase = (body or decode_body)(decoder, asr, f0, noise, s, frames, har)
    return waveform(decoder.generator, spec, phase, spec_frames)


def source_spectrum(
    generator: Any, f0: torch.Tensor, frames: Frames, seeds: Sequence[int]
) -> tuple[torch.Tensor, Frames]:
    """The harmonic source's STFT (magnitudes, then phases) that the generator's noise convolutions read, and
    its frames (``frames``: the decoder's input's). Each item's noise is drawn from its seed."""
    curve = frames.scaled(f0.shape[-1] // frames.size)
    scale = int(generator.m_source.l_sin_gen.upsample_scale)
    samples = curve.scaled(scale)
    spec_frames = spectrum_frames(generator, curve)
    with torch.no_grad():  # as the library's generator: no gradient through the source, whatever the caller's mode
        draws = source_draws(generator.m_source, curve, seeds, f0.device)
        f0_up = generator.f0_upsamp(f0[:, None]).transpose(1, 2)
        source = harmonic_source(generator.m_source, f0_up, curve, draws)
        if not curve.full:
            source = _reflect_past_end(source, samples.lengths, generator.stft.filter_length // 2)
        spec, phase = generator.stft.transform(source)
        return spec_frames.clip(torch.cat([spec, phase], dim=1)), spec_frames


def spectrum_frames(generator: Any, curve: Frames) -> Frames:
    """The frames of the source's STFT, and of the generator's output, for an F0 curve's ``curve``: a centred
    STFT has one frame more than hops (the count the last upsampling's reflection pad makes)."""
    scale = int(generator.m_source.l_sin_gen.upsample_scale)
    return curve.scaled(scale // generator.stft.hop_length, extra=1)


def decode_body(
    decoder: Any,
    asr: torch.Tensor,
    f0: torch.Tensor,
    noise: torch.Tensor,
    s: torch.Tensor,
    frames: Frames,
    har: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The decoder's blocks and the generator's, from features to the output's spectrum (magnitudes, phases):
    tensors in, tensors out, nothing drawn or read back from the device (what ``tts_node.kokoro_compile``
    compiles; ``frames.counts`` is not read)."""
    f0_down = frames.clip(decoder.F0_conv(f0.unsqueeze(1)))
    n_down = frames.clip(decoder.N_conv(noise.unsqueeze(1)))
    x, x_frames = adain_resblk(decoder.encode, torch.cat([asr, f0_down, n_down], dim=1), s, frames)
    asr_res = frames.clip(decoder.asr_res(asr))
    residual = True
    for block in decoder.decode:
        if residual:
            x = torch.cat([x, asr_res, f0_down, n_down], dim=1)
        x, x_frames = adain_resblk(block, x, s, x_frames)
        if block.upsample_type != "none":
            residual = False
    return generate(decoder.generator, x, s, x_frames, har)


def generate(
    generator: Any, x: torch.Tensor, s: torch.Tensor, frames: Frames, har: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """iSTFTNet's ``Generator.forward`` to its spectrum: ``frames`` are the ``[B, C, 2T]`` input's, ``har`` the
    source's (:func:`source_spectrum`); magnitudes and phases ``[B, n_fft / 2 + 1, 120 T + 1]``."""
    spec_frames = spectrum_frames(generator, frames)
    layer_frames = frames
    for i in range(generator.num_upsamples):
        x = F.leaky_relu(x, negative_slope=0.1)
        layer_frames = layer_frames.scaled(generator.ups[i].stride[0])
        if i == generator.num_upsamples - 1:
            # The reflection pad below adds one frame at the start: the STFT's frame count.
            layer_frames = spec_frames
        x_source = layer_frames.clip(generator.noise_convs[i](har)[..., : layer_frames.size])
        x_source = snake_resblock(generator.noise_res[i], x_source, s, layer_frames)
        x = generator.ups[i](x)
        if i == generator.num_upsamples - 1:
            x = generator.reflection_pad(x)
        x = layer_frames.clip(x[..., : layer_frames.size] + x_source)
        total = None
        for j in range(generator.num_kernels):
            y = snake_resblock(generator.resblocks[i * generator.num_kernels + j], x, s, layer_frames)
            total = y if total is None else total + y
        assert total is not None
        x = total / generator.num_kernels
    x = generator.conv_post(F.leaky_relu(x))
    half = generator.post_n_fft // 2 + 1
    return spec_frames.clip(torch.exp(x[:, :half, :])), torch.sin(x[:, half:, :])


def waveform(generator: Any, spec: torch.Tensor, phase: torch.Tensor, spec_frames: Frames) -> torch.Tensor:
    """The generator's inverse STFT: audio ``[B, hop * (frames - 1)]``, zero past an item's end."""
    if spec_frames.full:
        return generator.stft.inverse(spec, phase).squeeze(1)
    return istft(spec, phase, spec_frames.lengths, generator.stft)


def source_draws(source: Any, frames: Frames, seeds: Sequence[int], device: torch.device) -> SourceDraws:
    """What ``SourceModuleHnNSF``'s harmonic branch draws for each item, from a generator seeded with its seed.

    An item draws what the library draws from the global generator (its initial phases, then its noise, in
    that order and shape), so an item alone under ``torch.manual_seed(seed)`` and in any batch gets the same
    numbers. ``frames`` are the F0 curve's, at 1/``upsample_scale`` of the source's resolution."""
    gen = source.l_sin_gen
    scale = int(gen.upsample_scale)
    dim = gen.harmonic_num + 1
    initial = torch.zeros(len(seeds), dim, device=device)
    noise = torch.zeros(len(seeds), frames.size * scale, dim, device=device)
    for b, seed in enumerate(seeds):
        rng = torch.Generator(device=device).manual_seed(seed)
        initial[b] = torch.rand(1, dim, generator=rng, device=device)[0]
        own = frames.counts[b] * scale
        # The library's randn_like fills a tensor laid out as its sines are (harmonic-major, transposed), and
        # torch draws other numbers into such a tensor than into a contiguous one: draw into the same layout.
        drawn = torch.empty(1, dim, own, device=device).transpose(1, 2).normal_(generator=rng)
        noise[b, :own] = drawn[0]
    initial[:, 0] = 0
    return SourceDraws(initial, noise)


def harmonic_source(source: Any, f0: torch.Tensor, frames: Frames, draws: SourceDraws) -> torch.Tensor:
    """``SourceModuleHnNSF``'s harmonic branch on ``[B, L, 1]`` F0: ``[B, L]``, with each item's own random
    numbers (:func:`source_draws`). ``frames`` are ``f0``'s at 1/``upsample_scale`` of its resolution."""
    gen = source.l_sin_gen
    scale = int(gen.upsample_scale)
    harmonics = torch.arange(1, gen.harmonic_num + 2, dtype=f0.dtype, device=f0.device).view(1, 1, -1)
    fn = f0 * harmonics
    dim = fn.shape[-1]
    initial, noise = draws.initial, draws.noise
    rad = (fn / gen.sampling_rate) % 1
    rad[:, 0, :] = rad[:, 0, :] + initial
    rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / scale, mode="linear").transpose(1, 2)
    phase = torch.cumsum(rad, dim=1) * 2 * torch.pi
    # Hold each item's last phase past its end: linear upsampling reads one step past a frame, which the
    # item alone clamps to its own last step.
    if not frames.full:
        last = (frames.lengths - 1).clamp(min=0)
        held = torch.arange(phase.shape[1], device=phase.device)[None, :].minimum(last[:, None])
        phase = torch.gather(phase, 1, held.unsqueeze(-1).expand(-1, -1, dim))
    phase = F.interpolate(phase.transpose(1, 2) * scale, scale_factor=scale, mode="linear").transpose(1, 2)
    sines = torch.sin(phase) * gen.sine_amp
    uv = (fn[..., :1] > gen.voiced_threshold).float()
    noise_amp = uv * gen.noise_std + (1 - uv) * gen.sine_amp / 3
    waves = sines * uv + noise_amp * noise
    merged = source.l_tanh(source.l_linear(waves))
    return merged.transpose(1, 2).squeeze(1)


def istft(spec: torch.Tensor, phase: torch.Tensor, frame_counts: torch.Tensor, stft: Any) -> torch.Tensor:
    """``torch.istft`` (centred, Hann) of each item's own frames: ``[B, hop * (frames - 1)]``, zero past an
    item's end. One overlap-add for the batch; the window envelope counts each item's frames only, as the
    item's own inverse does (a padded frame's window would otherwise reweight its last samples)."""
    n_fft, hop = stft.filter_length, stft.hop_length
    window = stft.window.to(spec.device)
    mask = _mask(frame_counts, spec.shape[-1])  # [B, 1, T]
    chunks = torch.fft.irfft(spec * torch.exp(phase * 1j), n=n_fft, dim=1) * window.view(1, -1, 1) * mask
    total = n_fft + hop * (spec.shape[-1] - 1)
    ola = F.fold(chunks, output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop)).flatten(1)
    weights = (window * window).view(1, -1, 1) * mask
    envelope = F.fold(weights, output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop)).flatten(1)
    start = n_fft // 2
    out = ola[:, start : total - start]
    env = envelope[:, start : total - start]
    own = (torch.arange(out.shape[1], device=out.device)[None, :] < (hop * (frame_counts - 1))[:, None]).float()
    return torch.where(env > 1e-11, out / env.clamp(min=1e-11), torch.zeros_like(out)) * own


def _reflect_past_end(x: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """``[B, L]`` with the ``width`` samples past each item's end reflected from before it (as a centred STFT
    pads an item alone); samples further on are zero."""
    positions = torch.arange(x.shape[1], device=x.device)[None, :]
    ends = lengths[:, None]
    source = torch.where(positions < ends, positions, 2 * (ends - 1) - positions).clamp(min=0)
    inside = positions < ends + width
    return torch.gather(x, 1, source) * inside


def _mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    return (torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]).float().unsqueeze(1)
