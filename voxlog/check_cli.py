"""`voxlog check [--every S]`: run the canary (:mod:`voxlog.canary`) once, or forever as a Prometheus target,
through :class:`voxlog.client.Client` (the key ``voxlog demo`` and ``voxlog speak`` send too).

Once: prints the run and exits 0 when it passed, 1 when it failed (saying what). With ``--every S``: a
run every S seconds, each printed on one line, its results exported on ``--metrics-port`` from a
registry of its own (none of the services' metrics), which the alert rules and the dashboard read:

- ``voxlog_canary_up``: 1 when the last run passed, 0 when it failed;
- ``voxlog_canary_runs_total{result}`` and ``voxlog_canary_failures_total{check}`` (the first failure's kind);
- ``voxlog_canary_phase_seconds{phase}``: the last run's milestones after its submission was sent;
- ``voxlog_canary_last_run_timestamp_seconds`` and ``voxlog_canary_last_success_timestamp_seconds``.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from types import FrameType
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from voxlog.canary import PHASES, Canary, CanaryRun, report
from voxlog.client import Client, RetryPolicy
from voxlog.client_key import client_key

DEFAULT_TIMEOUT_S: Final = 60.0
REQUEST_TIMEOUT_S: Final = 30.0  # one request's (a held read asks for at most 25 s); 10 s to connect


def retry_policy(timeout_s: float) -> RetryPolicy:
    """The client's retries (no answer, 503, 502, 504, 429: the same request again), as any client of the API
    makes them, within a quarter of the run's time (at most 10 s): a blip a client rides out is no failure, an
    outage still fails the run well before the next one."""
    return RetryPolicy(attempts=4, budget_s=min(10.0, timeout_s / 4))


class CanaryMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge("voxlog_canary_up", "1: the canary's last run passed; 0: it failed.", registry=registry)
        self.runs = Counter("voxlog_canary_runs", "Canary runs by result.", ["result"], registry=registry)
        self.failures = Counter(
            "voxlog_canary_failures", "Failed canary runs by what failed first.", ["check"], registry=registry
        )
        self.phases = Gauge(
            "voxlog_canary_phase_seconds",
            "The last run's milestones, in seconds after its submission was sent.",
            ["phase"],
            registry=registry,
        )
        self.last_run = Gauge(
            "voxlog_canary_last_run_timestamp_seconds", "When the canary last ran.", registry=registry
        )
        self.last_success = Gauge(
            "voxlog_canary_last_success_timestamp_seconds",
            "When a canary run last passed (0: never).",
            registry=registry,
        )
        for result in ("passed", "failed"):
            self.runs.labels(result)  # present from the start, at 0

    def observe(self, run: CanaryRun, at: float) -> None:
        self.up.set(1 if run.passed else 0)
        self.runs.labels("passed" if run.passed else "failed").inc()
        if not run.passed:
            self.failures.labels(run.failed_check or "unknown").inc()
        for phase in PHASES:
            self.phases.labels(phase).set(run.phases.get(phase, float("nan")))
        self.last_run.set(at)
        if run.passed:
            self.last_success.set(at)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("check", help="the synthetic canary: submit, wait, download, judge the audio")
    check.add_argument("--api", default=None, help="API base URL (default: the dev stack's)")
    check.add_argument("--voice", default=None, help="voice (default: the first one a worker announced)")
    check.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds a run waits for its job (default: 60)"
    )
    check.add_argument("--every", type=float, default=None, help="run every S seconds, forever, exporting metrics")
    check.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics with --every")
    check.add_argument("--metrics-port", type=int, default=9464, help="port of /metrics with --every (default: 9464)")
    check.add_argument("--no-asr", action="store_true", help="do not recognize the words even with the asr extra")


def run(args: argparse.Namespace) -> int:
    from foundation.settings import DevSettings
    from voxlog import devstack

    api = str(args.api or devstack.api_url(DevSettings())).rstrip("/")
    retry = retry_policy(args.timeout)
    with Client(api, api_key=client_key(), timeout_s=REQUEST_TIMEOUT_S, retry=retry) as client:
        canary = Canary(client, voice=args.voice, timeout_s=args.timeout, listen=not args.no_asr)
        if args.every is None:
            outcome = canary.run()
            print(report(outcome), flush=True)
            return 0 if outcome.passed else 1
        return _forever(canary, args.every, args.metrics_host, args.metrics_port)


def _forever(canary: Canary, every_s: float, host: str, port: int) -> int:
    registry = CollectorRegistry()
    metrics = CanaryMetrics(registry)
    start_http_server(port, host, registry=registry)
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    print(f"voxlog check: a run every {every_s:g} s, metrics on http://{host}:{port}/metrics", flush=True)
    while not stop.is_set():
        outcome = canary.run()
        metrics.observe(outcome, time.time())
        print(report(outcome).replace("\n", " |"), flush=True)
        stop.wait(every_s)
    return 0
