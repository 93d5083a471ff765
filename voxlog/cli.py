"""The ``voxlog`` command line."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, NoReturn

from consumers.errors import ConsumerError, EngineHung
from contracts import ContractError
from foundation.errors import FoundationError
from foundation.lifecycle import Stopped
from foundation.logging import configure_logging
from foundation.settings import (
    MAX_DEV_BROKERS,
    AdminSettings,
    ApiSettings,
    DeliverySettings,
    DevSettings,
    NodeSettings,
    ProjectorSettings,
    SweeperSettings,
    VerifySettings,
    WorkerSettings,
)
from infra.errors import InfraError
from producers.errors import ProducerError
from projections.errors import ProjectionError
from tts_node.errors import TtsNodeError
from voxlog.errors import VoxlogError

EXIT_ENGINE_HUNG = 3
# The commands whose parser and work live in a module of their own, by name. Every voxlog process (each
# service's too) parses its command line, so a command's module is imported only when the command is run
# or the whole parser is asked for (help, an unknown command): the others' imports cost a service start
# 0.1 to 0.2 s of CPU, and a CLI command 0.3 s.
_COMMAND_MODULES: Final = {
    "replay": "voxlog.replay_cli",
    "audit": "voxlog.audit_cli",
    "archive": "voxlog.archive_cli",
    "lag": "voxlog.lag_cli",
    "cache": "voxlog.cache_cli",
    "admin": "voxlog.admin_cli",
    "keys": "voxlog.keys_cli",
    "lexicon": "voxlog.lexicon_cli",
    "webhooks": "voxlog.webhooks_cli",
    "usage": "voxlog.usage_cli",
    "check": "voxlog.check_cli",
    "speak": "voxlog.speak_cli",
}
_ERRORS = (
    VoxlogError,
    FoundationError,
    InfraError,
    ContractError,
    ProducerError,
    ConsumerError,
    ProjectionError,
    TtsNodeError,
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``command``, the parsers of the other commands of :data:`_COMMAND_MODULES` are
    left out (their modules are not imported)."""
    parser = argparse.ArgumentParser(prog="voxlog", description="Durable text-to-speech jobs on Kafka and Postgres.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    commands = parser.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="the local stack: Kafka, PostgreSQL, api, worker, projector")
    dev_commands = dev.add_subparsers(dest="dev_command", required=True)
    dev_up = dev_commands.add_parser("up", help="install what is missing, start everything, wait until it answers")
    dev_up.add_argument(
        "--brokers",
        type=int,
        choices=range(1, MAX_DEV_BROKERS + 1),
        default=None,
        metavar="N",
        help="Kafka brokers (1, or 3 for a replicated cluster; default: as many as the stack's data is for, else 1)",
    )
    down = dev_commands.add_parser("down", help="stop every process and service (data is kept)")
    down.add_argument("--purge", action="store_true", help="also delete the stack's data directory")
    dev_commands.add_parser("status", help="show each service and process; exit 1 when one is down")

    commands.add_parser("api", help="serve the HTTP API (VOXLOG_API_HOST:VOXLOG_API_PORT)")
    worker = commands.add_parser("worker", help="run one synthesis worker: one model on one device")
    worker.add_argument("--device", help="cpu or cuda:N (default: VOXLOG_DEVICE, cpu)")
    commands.add_parser("projector", help="apply the event log to the Postgres tables")
    commands.add_parser("sweeper", help="release claims that stopped making progress (one acts, others stand by)")
    commands.add_parser("deliver", help="deliver the jobs' outcomes to the tenants' webhook endpoints (one sends)")
    node = commands.add_parser("node", help="the standalone speech node: /tts/stream (SSE), /tts, /health")
    node.add_argument("--device", help="cpu or cuda:N (default: VOXLOG_DEVICE, cpu)")

    models = commands.add_parser("models", help="model files")
    models_commands = models.add_subparsers(dest="models_command", required=True)
    random_kokoro = models_commands.add_parser(
        "random-kokoro",
        help="write a RANDOM-initialized Kokoro checkpoint (config, weights, a voice pack) for tests and "
        "benchmarks only: same architecture and compute as the real model, noise for sound",
    )
    random_kokoro.add_argument("directory", type=Path)
    random_kokoro.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")

    demo = commands.add_parser("demo", help="submit a text through the API, wait, write the WAV")
    demo.add_argument("--api", default=None, help="API base URL (default: the dev stack's)")
    demo.add_argument("--text", default=None, help="text to speak (default: a short demo sentence)")
    demo.add_argument("--voice", default=None, help="voice (default: the first one a worker announced)")
    demo.add_argument("--out", type=Path, default=Path("voxlog-demo.wav"), help="where to write the WAV")

    verify = commands.add_parser(
        "verify", help="check the invariants over the log, the projection and the blob store; exit 1 on a violation"
    )
    verify.add_argument("--settled", action="store_true", help="also require every job to be terminal")
    verify.add_argument(
        "--wait", type=float, default=60.0, help="seconds to let the projector catch up with the log (default: 60)"
    )
    for name, module in _COMMAND_MODULES.items():
        if command is None or command == name:
            importlib.import_module(module).add_parser(commands)
    chaos = commands.add_parser(
        "chaos", help="inject every fault into voxlog on a Kafka and PostgreSQL of its own; write docs/reliability.md"
    )
    chaos.add_argument("--quick", action="store_true", help="smaller loads; writes nothing unless --docs is given")
    chaos.add_argument("--docs", type=Path, default=None, help="where to write reliability.md (default: docs/)")
    chaos.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="Kafka brokers of the campaign's stack (default: 1); with 3, the cluster's faults too",
    )
    chaos.add_argument(
        "--only", default="", help="comma-separated faults to inject (their names, e.g. leader_kill; default: all)"
    )
    commands.add_parser("migrate", help="apply pending Postgres migrations (VOXLOG_DATABASE_URL)")
    topics = commands.add_parser(
        "topics",
        help="create missing Kafka topics (VOXLOG_KAFKA_BOOTSTRAP_SERVERS), then copy the old nodes topic's records"
        " into the control topic",
    )
    topics.add_argument(
        "--migrate-from",
        metavar="NAME",
        default=None,
        help="the old nodes topic to copy into the control topic, where VOXLOG_NODES_TOPIC named one"
        " (default: voxlog.nodes.v1, copied when it exists)",
    )
    docs_cmd = commands.add_parser(
        "docs", help="regenerate docs/events.schema.json, docs/asyncapi.json and the reference pages' tables"
    )
    docs_cmd.add_argument("--check", action="store_true", help="fail when the committed documents are stale")
    commands.add_parser("config", help="print every setting with its default, as a Markdown table")
    bench = commands.add_parser(
        "bench", help="benchmarks against a Postgres SKIP LOCKED queue; writes docs/benchmarks.md", add_help=False
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, help="see `voxlog bench --help`")
    return parser


def _dev(args: argparse.Namespace) -> int:
    from voxlog import devstack

    settings = DevSettings()
    if args.dev_command == "up":
        lines = asyncio.run(devstack.up(settings, args.brokers))
        statuses = asyncio.run(devstack.status(settings))
        print("\n".join([s.line() for s in statuses] + lines))
        return 0 if all(s.up for s in statuses) else 1
    if args.dev_command == "down":
        devstack.down(settings, purge=args.purge)
        print("stopped" + (" and purged" if args.purge else ""))
        return 0
    statuses = asyncio.run(devstack.status(settings))
    print("\n".join(s.line() for s in statuses))
    return 0 if all(s.up for s in statuses) else 1


def _services(args: argparse.Namespace) -> int:
    # Imported here, each process its own root: `voxlog dev status` should not pay for uvicorn, asyncpg pools
    # and onnxruntime, nor a worker for the API's web framework.
    if getattr(args, "device", None):
        os.environ["VOXLOG_DEVICE"] = args.device
    try:
        if args.command == "worker":
            from voxlog.composition.worker import run_worker

            asyncio.run(run_worker(WorkerSettings()))
        elif args.command == "api":
            from voxlog.composition.api import run_api

            asyncio.run(run_api(ApiSettings()))
        elif args.command == "node":
            from voxlog.composition.node import run_node

            asyncio.run(run_node(NodeSettings()))
        elif args.command == "sweeper":
            from voxlog.composition.sweeper import run_sweeper

            asyncio.run(run_sweeper(SweeperSettings()))
        elif args.command == "deliver":
            from voxlog.composition.deliver import run_deliver

            asyncio.run(run_deliver(DeliverySettings()))
        else:
            from voxlog.composition.projector import run_projector

            asyncio.run(run_projector(ProjectorSettings()))
    except Stopped as exc:  # asked to stop while a dependency was still down: a clean stop
        print(f"voxlog: {exc}", file=sys.stderr)
    except EngineHung as exc:
        # The engine's thread can be neither stopped nor joined: leave now, so that a supervisor
        # starts a fresh process (the job was given back, the group has taken the partitions).
        print(f"voxlog: {exc}; exiting so that a fresh process can take the device", file=sys.stderr, flush=True)
        os._exit(EXIT_ENGINE_HUNG)
    return 0


def _models(args: argparse.Namespace) -> int:
    from tts_node.random_checkpoint import write_random_checkpoint

    directory = write_random_checkpoint(args.directory, seed=args.seed)
    print(f"wrote a random-initialized Kokoro checkpoint to {directory} (tests and benchmarks only)")
    return 0


def _admin(args: argparse.Namespace) -> int:
    from projections.migrations import migrate_database
    from voxlog.topic_migration import LEGACY_CONTROL_TOPIC, copy_legacy_topic
    from voxlog.topics import ensure_topics, topic_specs

    settings = AdminSettings()
    if args.command == "migrate" and not settings.migrate:
        print(
            "voxlog: VOXLOG_MIGRATE=false: this process does not apply migrations (the worker images);"
            " run `voxlog migrate` from the api image",
            file=sys.stderr,
        )
        return 2
    if args.command == "migrate":
        applied = asyncio.run(migrate_database(settings.database_url.get_secret_value(), settings.database_schema))
        print("applied: " + (", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none pending"))
    else:
        kafka = settings.kafka_access()
        states = asyncio.run(ensure_topics(kafka, topic_specs(settings)))
        print("\n".join(f"{name}: {state}" for name, state in states.items()))
        legacy = args.migrate_from or LEGACY_CONTROL_TOPIC
        copied = asyncio.run(
            copy_legacy_topic(kafka, legacy, settings.control_topic, required=args.migrate_from is not None)
        )
        if copied is not None:
            print(copied.describe())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from voxlog import devstack
    from voxlog.demo import DEMO_TEXT, run_demo

    api = args.api or devstack.api_url(DevSettings())
    job = run_demo(api, args.text or DEMO_TEXT, args.voice, args.out)
    seconds = (job.total_duration_ms or 0) / 1000
    print(f"job {job.job_id} completed: {job.segment_count} segments, {seconds:.1f} s of speech")
    print(f"wrote {args.out.resolve()}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from projections.verify import verify

    settings = VerifySettings()
    report = asyncio.run(
        verify(
            settings.kafka_access(),
            settings.jobs_topic,
            settings.database_url.get_secret_value(),
            settings.database_schema,
            settings.projector_name,
            settled=args.settled,
            wait_s=args.wait,
        )
    )
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _docs(check: bool) -> int:
    from voxlog import docs

    try:
        if check:
            stale = docs.stale()
            for name in stale:
                print(f"docs/{name} is stale: run `voxlog docs`", file=sys.stderr)
            return 1 if stale else 0
        for path in docs.write():
            print(f"wrote {path}")
    except docs.MissingMarkers as missing:
        print(missing, file=sys.stderr)
        return 1
    return 0


def _bench(bench_args: Sequence[str]) -> NoReturn:
    # The benchmarks sit above the application (they measure it): the command runs them as their
    # own program rather than importing them.
    os.execv(sys.executable, [sys.executable, "-m", "bench", *bench_args])  # noqa: S606 - argv we built, no shell


def _chaos(args: argparse.Namespace) -> int:
    from voxlog.chaos.run import main as chaos_main  # the campaign's own modules load only for it

    return chaos_main(args.quick, args.docs, args.brokers, args.only)


def _config(_: argparse.Namespace) -> int:
    from voxlog.config_docs import settings_table

    print(settings_table())
    return 0


_COMMANDS: Final[dict[str, Callable[[argparse.Namespace], int]]] = {
    "dev": _dev,
    **dict.fromkeys(("api", "worker", "projector", "sweeper", "deliver", "node"), _services),
    "models": _models,
    **dict.fromkeys(("migrate", "topics"), _admin),
    "demo": _demo,
    "docs": lambda args: _docs(args.check),
    "verify": _verify,
    "chaos": _chaos,
    "config": _config,
}


def run(args: argparse.Namespace) -> int:
    if args.command in _COMMAND_MODULES:
        command: Callable[[argparse.Namespace], int] = importlib.import_module(_COMMAND_MODULES[args.command]).run
        return command(args)
    return _COMMANDS[args.command](args)


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, when it is one of voxlog's (``None``: help, or an unknown command, which need
    the whole parser)."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--log-level")
    first.add_argument("command", nargs="?")
    try:
        known, _ = first.parse_known_args(argv)
    except SystemExit:  # a malformed global option: the whole parser says what is wrong
        return None
    named: str | None = known.command
    return named if named in _COMMAND_MODULES or named in _COMMANDS or named == "bench" else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its options are its own (`voxlog bench --help`)
        _bench(argv[1:])
    args = build_parser(_command_named(argv)).parse_args(argv)
    configure_logging(args.log_level)
    return _guarded(lambda: run(args))


def _guarded(command: Callable[[], int]) -> int:
    try:
        return command()
    except _ERRORS as exc:
        print(f"voxlog: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
