"""How big each scenario is: ``full`` (the published figures) and ``quick`` (a smoke run of every scenario)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    broker_warmup_jobs: int
    warmup_jobs: int
    throughput_workers: tuple[int, ...]
    throughput_jobs: int
    light_jobs: int
    saturation_paragraphs: int
    coalesce_submissions: int
    coalesce_texts: int
    coalesce_synth_ms: float
    scale_workers: tuple[int, ...]
    scale_jobs_per_worker: int
    scale_synth_ms: float
    first_audio_runs: int
    replay_jobs: int
    hol_workers: int = 4
    hol_documents: int = 2
    hol_document_chars: int = 4800
    hol_ms_per_char: float = 2.0
    hol_short: int = 30
    hol_short_gap_s: float = 0.2
    batch_requests: int = 10_000
    batch_workers: int = 4
    prio_workers: int = 2
    prio_backlog: int = 300  # batch requests queued first: about 20 minutes of audio
    prio_interactive: int = 20
    prio_gap_s: float = 0.3
    prio_ms_per_char: float = 2.0
    sbl_workers: int = 2  # (l) short behind long: the shape, a minute's text against a second's
    sbl_long: int = 4
    sbl_long_chars: int = 1200
    sbl_short: int = 24
    sbl_ms_per_char: float = 10.0
    sbl_synth_ms: float = 20.0
    sbl_real_long: int = 2  # and once with the real model, one worker
    sbl_real_long_chars: int = 600
    sbl_real_short: int = 6
    ten_workers: int = 4  # (m) tenants
    ten_a_batch: int = 10_000
    ten_b_interactive: int = 20
    ten_b_batch: int = 100
    ten_synth_ms: float = 20.0
    ten_gap_s: float = 0.3
    ten_paced_synth_ms: float = 20.0  # and at the pace of (j): synthesis, not orchestration, is the work
    ten_paced_ms_per_char: float = 2.0
    gpu_pace_workers: int = 4  # (n) GPU pace: a forward of up to 32 segments in 8 ms + 0.02 ms a phoneme id
    gpu_pace_jobs: int = 4000
    gpu_pace_batch_ms: float = 8.0
    gpu_pace_ms_per_id: float = 0.02
    gpu_pace_max_batch: int = 32
    zipf_requests: int = 1000  # (o) duplicates under a Zipf load: the 1,000 requests over 161 texts
    zipf_texts: int = 161
    zipf_clients: int = 20


FULL = Profile(
    name="full",
    broker_warmup_jobs=3000,
    warmup_jobs=100,
    throughput_workers=(1, 2, 4),
    throughput_jobs=400,
    light_jobs=60,
    saturation_paragraphs=6,
    coalesce_submissions=1000,
    coalesce_texts=50,
    coalesce_synth_ms=100.0,
    scale_workers=(1, 2, 4, 8),
    scale_jobs_per_worker=40,
    scale_synth_ms=200.0,
    first_audio_runs=5,
    replay_jobs=10000,
)

QUICK = Profile(
    name="quick",
    broker_warmup_jobs=150,
    warmup_jobs=30,
    throughput_workers=(1, 2),
    throughput_jobs=100,
    light_jobs=10,
    saturation_paragraphs=1,
    coalesce_submissions=200,
    coalesce_texts=10,
    coalesce_synth_ms=100.0,
    scale_workers=(1, 2, 4),
    scale_jobs_per_worker=5,
    scale_synth_ms=200.0,
    first_audio_runs=1,
    replay_jobs=500,
    hol_document_chars=2000,
    hol_short=8,
    batch_requests=1000,
    batch_workers=2,
    prio_backlog=100,
    prio_interactive=8,
    sbl_long=2,
    sbl_long_chars=600,
    sbl_short=8,
    sbl_real_long=1,
    sbl_real_long_chars=300,
    sbl_real_short=3,
    ten_a_batch=1000,
    ten_b_interactive=5,
    ten_b_batch=20,
    gpu_pace_jobs=400,
    zipf_requests=120,
    zipf_texts=20,
)
