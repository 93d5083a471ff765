"""`voxlog archive`: the jobs topic's records older than a time, copied to compressed files (projections.archive)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from foundation.settings import ArchiveSettings
from projections.archive_export import archive_before
from voxlog.replay_cli import moment


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    archive = commands.add_parser(
        "archive", help="copy the jobs topic's records appended before a time to compressed files with a manifest"
    )
    archive.add_argument("--before", required=True, type=moment, help="ISO 8601 time (UTC if no zone)")
    archive.add_argument("--to", required=True, type=Path, help="the archive directory (created, or added to)")


def run(args: argparse.Namespace) -> int:
    settings = ArchiveSettings()
    topic = settings.jobs_topic
    done = asyncio.run(archive_before(settings.kafka_access(), topic, args.to, args.before))
    for entry in done.files:
        span = f"offsets {entry.first}..{entry.end - 1}"
        print(f"  {entry.file}: partition {entry.partition}, {span}, {entry.records:,} records")
    print(f"archived {done.records:,} records of {topic} in {len(done.files)} new file(s) into {args.to}")
    ends = ", ".join(f"{p}:{end}" for p, end in sorted(done.ends.items())) or "nothing yet"
    print(f"the archive now ends at {ends} (partition:offset); records before these may leave the topic")
    return 0
