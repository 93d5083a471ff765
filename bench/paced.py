"""``python -m bench.paced <voxlog arguments>``: voxlog's CLI, its benchmark engine paced as asked.

The ``bench-sleep`` engine's pace and fault are no settings of voxlog's (issue 38, item 3): ``voxlog
worker`` makes it untimed and faultless. What the benchmarks, the fault campaigns (``voxlog chaos``) and
the end-to-end tests start instead of ``voxlog`` is this entry point, the only reader of these variables:

- ``VOXLOG_BENCH_SYNTH_MS`` (default 0): milliseconds the engine sleeps per segment;
- ``VOXLOG_BENCH_MS_PER_CHAR`` (default 0): and per character of a segment (a segment's synthesis time
  grows with its text, as a model's does);
- ``VOXLOG_BENCH_FAULT`` (fault tests only): ``hang:TEXT`` or ``fail:TEXT`` makes the engine hang on, or
  fail, segments containing TEXT; ``gate:TEXT@FIFO`` holds the first until a test opens the named pipe.

It installs that engine's maker (``tts_node.bench_sleep.make_with``), then runs ``voxlog`` with the
arguments it was given: every other engine is as ``voxlog`` runs it.

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
from collections.abc import Mapping, Sequence
from typing import Final

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
    fault: str = Field("", description="hang:TEXT, fail:TEXT or gate:TEXT@FIFO (fault tests only).")

    def engine(self, device: str) -> BenchSleepEngine:
        return BenchSleepEngine(self.synth_ms, device=device, fault=self.fault, ms_per_char=self.ms_per_char)


def install(settings: BenchEngineSettings | None = None) -> Maker:
    """This process's bench-sleep engine is paced by ``settings`` (by default, this process's environment);
    returns the maker it replaces."""
    return make_with((settings or BenchEngineSettings()).engine)


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
