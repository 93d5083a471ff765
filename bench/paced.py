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
arguments it was given: every other process, and every other engine, is as ``voxlog`` runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tts_node.bench_sleep import BenchSleepEngine, Maker, make_with
from voxlog import cli


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


def main(argv: Sequence[str] | None = None) -> int:
    install()
    return cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
