"""``python -m bench.paced <voxlog arguments>``: voxlog's CLI, its benchmark engine paced as asked.

The ``bench-sleep`` engine's pace and fault are no settings of voxlog's (issue 38, item 3): ``voxlog
worker`` makes it untimed and faultless. What the benchmarks, the fault campaigns (``voxlog chaos``) and
the end-to-end tests start instead of ``voxlog`` is this entry point, the only reader of these variables:

- ``VOXLOG_BENCH_SYNTH_MS`` (default 0): milliseconds the engine sleeps per segment;
- ``VOXLOG_BENCH_MS_PER_CHAR`` (default 0): and per character of a segment (a segment's synthesis time
  grows with its text, as a model's does);
- ``VOXLOG_BENCH_BATCH_MS`` and ``VOXLOG_BENCH_MS_PER_ID`` (default 0): the batched pace instead (a GPU's,
  issue 41): a forward of up to ``VOXLOG_BENCH_MAX_BATCH`` segments (default 0: 32) costs ``BATCH_MS`` plus
  ``MS_PER_ID`` per phoneme id of its segments; a worker batches so on a ``cuda:N`` device;
- ``VOXLOG_BENCH_FAULT`` (fault tests only): ``hang:TEXT`` or ``fail:TEXT`` makes the engine hang on, or
  fail, segments containing TEXT; ``gate:TEXT@FIFO`` holds the first until a test opens the named pipe.

It installs that engine's maker (``tts_node.bench_sleep.make_with``), then runs ``voxlog`` with the
arguments it was given: every other engine is as ``voxlog`` runs it. The engines it makes are counted on the
process's ``/metrics`` (:class:`EngineCounters`): the seconds they spent in forwards, their forwards and the
segments in them, which the benchmarks read for an engine's busy share and its batches.

It is also where those tests and campaigns make voxlog's own clocks faster, so that what they wait for (a
silent worker released, a sweep, a lag sample, a revoked key refused) happens in seconds: the intervals and
bounds in :data:`TUNING` are no settings of voxlog's either (issue 38, item 3), but constants of its
composition (``voxlog.composition``), which each process reads when it starts; this entry point sets the ones
its environment names, by the same names the settings had, before it runs the process. ``voxlog`` ignores
these variables.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from foundation.outages import summarize_every
from tts_node.bench_sleep import BenchSleepEngine, Maker, make_with
from voxlog import cli

_CONFIGS: Final = "voxlog.composition.configs"
_API: Final = "voxlog.composition.api"
_WORKER: Final = "voxlog.composition.worker"

TUNING: Final[Mapping[str, tuple[tuple[str, str, str], ...]]] = {
    "VOXLOG_HEARTBEAT_S": (("worker", _WORKER, "HEARTBEAT_S"),),
    "VOXLOG_RETRY_BASE_DELAY_S": (("worker", _CONFIGS, "RETRY_BASE_DELAY_S"),),
    "VOXLOG_WATCHDOG_FACTOR": (("worker", _CONFIGS, "WATCHDOG_FACTOR"),),
    "VOXLOG_WATCHDOG_MIN_S": (("worker", _CONFIGS, "WATCHDOG_MIN_S"),),
    "VOXLOG_STALE_AFTER_S": (("sweeper", _CONFIGS, "STALE_AFTER_S"), ("api", _API, "STALE_AFTER_S")),
    "VOXLOG_SWEEP_INTERVAL_S": (("sweeper", _CONFIGS, "SWEEP_INTERVAL_S"),),
    "VOXLOG_SWEEP_BLOB_GRACE_S": (("sweeper", _CONFIGS, "SWEEP_BLOB_GRACE_S"),),
    "VOXLOG_CACHE_SWEEP_INTERVAL_S": (("sweeper", _CONFIGS, "CACHE_SWEEP_INTERVAL_S"),),
    "VOXLOG_PROJECTOR_BATCH": (("projector", _CONFIGS, "PROJECTOR_BATCH"),),
    "VOXLOG_AUTH_CACHE_S": (("api", _API, "AUTH_CACHE_S"),),
    "VOXLOG_LEXICON_CACHE_S": (("api", _API, "LEXICON_CACHE_S"),),
    "VOXLOG_LAG_INTERVAL_S": (("api", _API, "LAG_INTERVAL_S"),),
    "VOXLOG_LAG_STALL_AFTER_S": (("api", _API, "LAG_STALL_AFTER_S"),),
    "VOXLOG_NODE_FORGET_AFTER_S": (("api", _API, "NODE_FORGET_AFTER_S"),),
}
"""Each variable, and the constant it sets in each process that reads it: (command, module, name). Only the
command's own modules are imported: a worker does not load the API's to set what it never reads."""

OUTAGE_SUMMARY: Final = "VOXLOG_OUTAGE_SUMMARY_S"
"""Every process's interval between an outage's summaries (``foundation.outages.summarize_every``)."""

_COMMANDS: Final = frozenset(command for targets in TUNING.values() for command, _, _ in targets)


class BenchEngineSettings(BaseSettings):
    """The benchmark engine's pace and fault (``VOXLOG_BENCH_*``), read by this entry point alone."""

    model_config = SettingsConfigDict(env_prefix="VOXLOG_BENCH_", extra="ignore", frozen=True)

    synth_ms: float = Field(0.0, ge=0, description="Milliseconds the bench-sleep engine sleeps per segment.")
    ms_per_char: float = Field(
        0.0, ge=0, description="Milliseconds it sleeps per character of a segment, on top of synth_ms."
    )
    batch_ms: float = Field(
        0.0, ge=0, description="The batched pace: milliseconds a forward of up to max_batch segments costs."
    )
    ms_per_id: float = Field(0.0, ge=0, description="And per phoneme id of the forward's segments, on top of batch_ms.")
    max_batch: int = Field(0, ge=0, description="Segments a forward takes at the batched pace (0: 32).")
    fault: str = Field("", description="hang:TEXT, fail:TEXT or gate:TEXT@FIFO (fault tests only).")

    def engine(self, device: str) -> BenchSleepEngine:
        return BenchSleepEngine(
            self.synth_ms,
            device=device,
            fault=self.fault,
            ms_per_char=self.ms_per_char,
            batch_ms=self.batch_ms,
            ms_per_id=self.ms_per_id,
            max_batch=self.max_batch,
        )


BUSY: Final = "voxlog_bench_engine_busy_seconds"
FORWARDS: Final = "voxlog_bench_engine_forwards"
FORWARD_SEGMENTS: Final = "voxlog_bench_engine_forward_segments"


class EngineCounters(Collector):
    """The process's bench-sleep engines' own counts, as Prometheus counters: seconds in forwards, forwards, and
    segments in them (read from the engines when scraped, so nothing is counted twice)."""

    def __init__(self) -> None:
        self.engines: list[BenchSleepEngine] = []

    def collect(self) -> Iterator[CounterMetricFamily]:
        engines = list(self.engines)
        for name, what, value in (
            (BUSY, "Seconds the benchmark engine spent in forwards (its busy time).", lambda e: e.busy_s),
            (FORWARDS, "Forwards (engine calls) the benchmark engine made.", lambda e: e.forwards),
            (FORWARD_SEGMENTS, "Segments in the benchmark engine's forwards.", lambda e: e.forward_segments),
        ):
            yield CounterMetricFamily(name, what, value=float(sum(value(e) for e in engines)))


COUNTERS: Final = EngineCounters()
_registered: list[bool] = []


def install(settings: BenchEngineSettings | None = None) -> Maker:
    """This process's bench-sleep engine is paced by ``settings`` (by default, this process's environment), and
    counted on its ``/metrics`` (:data:`COUNTERS`); returns the maker it replaces."""
    if not _registered:
        REGISTRY.register(COUNTERS)
        _registered.append(True)
    chosen = settings or BenchEngineSettings()

    def counted(device: str) -> BenchSleepEngine:
        engine = chosen.engine(device)
        COUNTERS.engines.append(engine)
        return engine

    return make_with(counted)


def tune(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, float]:
    """Set the constants :data:`TUNING` names for the command in ``argv`` from ``environ``; what was set, by
    ``module.NAME``."""
    command = next((word for word in argv if word in _COMMANDS), None)
    done: dict[str, float] = {}
    for variable, targets in TUNING.items():
        if variable not in environ:
            continue
        for target_command, module_name, name in targets:
            if target_command == command:
                module = importlib.import_module(module_name)
                value = type(getattr(module, name))(environ[variable])
                setattr(module, name, value)
                done[f"{module_name}.{name}"] = value
    if OUTAGE_SUMMARY in environ:
        summarize_every(float(environ[OUTAGE_SUMMARY]))
        done["foundation.outages.Outage.summary_s"] = float(environ[OUTAGE_SUMMARY])
    return done


def main(argv: Sequence[str] | None = None) -> int:
    install()
    tune(sys.argv[1:] if argv is None else argv)
    return cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
