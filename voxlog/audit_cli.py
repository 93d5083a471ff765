"""`voxlog audit`: a job's history, or a fingerprint's jobs, read from the log (the work is projections.audit).

A job's audit ends with its webhook deliveries, which are the projection's (``webhook_deliveries``), not the
log's: the output says so."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from contracts import JobClaimed, JobCompleted, JobQueued, SegmentProduced
from contracts.job_state import event_attempt
from contracts.scheduling import WaitedBehind
from foundation.db import open_pool
from foundation.settings import AuditSettings
from projections.audit import (
    DELIVERIES_SOURCE,
    AuditEntry,
    JobHistory,
    StateSpan,
    WaitedStretch,
    as_json,
    deliveries_json,
)
from projections.job_log import JobLogReader, LogAuditor
from projections.rows import WebhookDeliveryRow

Deliveries = Sequence[WebhookDeliveryRow] | None  # None: the projection could not be read


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser("audit", help="a job's full history from the log: every event, attempt and fence")
    which = audit.add_mutually_exclusive_group(required=True)
    which.add_argument("job_id", nargs="?", type=uuid.UUID, help="the job to audit")
    which.add_argument("--fingerprint", help="list every job that shares this fingerprint")
    audit.add_argument("--json", action="store_true", help="print JSON (the API's /v1/jobs/{id}/events body)")


def run(args: argparse.Namespace) -> int:
    settings = AuditSettings()
    histories, deliveries = asyncio.run(_audit(settings, args.job_id, args.fingerprint))
    if args.json:
        bodies = [as_json(h) for h in histories]
        if args.job_id:
            print(json.dumps({**bodies[0], "webhook_deliveries": deliveries_json(deliveries)}, indent=2))
        else:
            print(json.dumps(bodies, indent=2))
    elif args.job_id:
        print("\n".join(job_report(histories[0], deliveries)))
    else:
        print("\n".join(fingerprint_report(args.fingerprint, histories)))
    return 0 if all(h.found for h in histories) and histories else 1


async def _audit(
    settings: AuditSettings, job_id: uuid.UUID | None, fingerprint: str | None
) -> tuple[list[JobHistory], Deliveries]:
    reader = JobLogReader(settings.kafka_access(), settings.jobs_topic)
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        auditor = LogAuditor(reader, pool, timedelta(seconds=settings.cache_ttl))
        if job_id is not None:
            return [await auditor.job(job_id)], await auditor.deliveries(job_id)
        assert fingerprint is not None
        return await auditor.fingerprint(fingerprint), []
    finally:
        await pool.close()


def _time(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if moment else "-"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def job_report(history: JobHistory, deliveries: Deliveries = ()) -> list[str]:
    """The audit of one job, for a terminal: the log's history, then its webhook deliveries (the projection's)."""
    if not history.found:
        return [f"job {history.job_id}: no event in the log", *_delivery_lines(deliveries)]
    status = history.status
    lines = [
        f"job {history.job_id}  {status.state if status else 'unknown'}, attempt {status.attempt if status else '-'}",
        f"fingerprint {history.fingerprint}",
        f"trace {history.trace_id}",
    ]
    if history.request is not None:
        r = history.request
        lines.append(
            f"request {len(r.text)} chars, voice {r.voice}, speed {r.speed}, {r.lang}, {r.engine} {r.model_version},"
            f" {r.format} {r.sample_rate} Hz"
        )
    if history.degraded_from is not None:
        lines.append(f"degraded {_degraded(history)}")
    if history.reused_from is not None:
        lines.append(f"audio reused from job {history.reused_from} (cache hit or coalesced duplicate)")
    lines += ["", f"{'at':<10} {'appended (UTC)':<23} {'att':>3}  {'event':<18} {'by':<34} outcome"]
    lines += [_entry_line(entry, history) for entry in history.entries]
    if history.attempts:
        lines += ["", "attempts"]
        for a in sorted(history.attempts.values(), key=lambda a: a.attempt):
            ended = f"{a.ended_by} after {_seconds(a.seconds)}" if a.ended_at else "still running"
            fenced = f", {a.fenced} fenced event(s)" if a.fenced else ""
            lines.append(
                f"  {a.attempt}  {a.worker_id} on {a.host or 'a host not recorded'} ({a.engine} {a.model_version},"
                f" {a.device}) claimed"
                f" {_time(a.claimed_at)}: {ended}, {a.segments} segment(s){fenced}"
            )
    if history.waited:
        lines += ["", "waited behind (on its worker, by the worker's record)"]
        for stretch in history.waited:
            lines += _waited_lines(stretch)
    spans = ", ".join(_span(s) for s in history.spans)
    lines += ["", f"time in state  {spans}"]
    return lines + _delivery_lines(deliveries)


def _delivery_lines(deliveries: Deliveries) -> list[str]:
    """The job's webhook deliveries, each as its latest record says; none when it has none."""
    if deliveries is not None and not deliveries:
        return []
    lines = ["", f"webhook deliveries, from {DELIVERIES_SOURCE}"]
    if deliveries is None:
        return [*lines, "  unknown: PostgreSQL could not be read"]
    for d in sorted(deliveries, key=lambda d: (d.created_at, d.delivery_id.bytes)):
        last = f", last HTTP {d.last_status}" if d.last_status is not None else ""
        last += f" in {d.last_duration_ms} ms" if d.last_duration_ms is not None else ""
        last += f", error: {d.last_error}" if d.last_error else ""
        due = f", next attempt {_time(d.next_attempt_at)}" if d.state == "pending" and d.next_attempt_at else ""
        lines.append(
            f"  {d.delivery_id}  {d.event_type} to endpoint {d.endpoint_id}: {d.state}, {d.attempts} attempt(s)"
            f"{last}{due}"
        )
    return lines


def _waited(waited: WaitedBehind) -> str:
    """``3 job(s), 12 segment(s), 4.20s``: how much took the engine while the job waited."""
    return f"{waited.job_count} job(s), {waited.segment_count} segment(s), {_seconds(waited.waited_ms / 1000)}"


def _waited_lines(stretch: WaitedStretch) -> list[str]:
    """One stretch: its totals and policy, then each job named, with its segments and the rule that put it first."""
    w = stretch.waited
    when = "before its claim" if stretch.stretch == "queued" else "while claimed"
    lines = [f"  attempt {stretch.attempt} {when}: {_waited(w)} (policy {w.policy})"]
    lines += [
        f"    {turns.job_id}  {turns.tenant}/{turns.priority}  {turns.segments} segment(s)  by {turns.rule}"
        for turns in w.jobs
    ]
    if w.job_count > len(w.jobs):
        lines.append(f"    and {w.job_count - len(w.jobs)} more job(s)")
    if not w.complete:
        lines.append("    (the worker's memory of turns did not reach back to the start: counts of what it remembers)")
    return lines


def _span(span: StateSpan) -> str:
    name = f"{span.state} #{span.attempt}" if span.attempt else str(span.state)
    if span.until is None:
        return f"{name} (still)"
    return name if span.until == span.since else f"{name} {_seconds(span.seconds)}"


def _entry_line(entry: AuditEntry, history: JobHistory) -> str:
    event, at = entry.logged.event, entry.logged.position
    attempt = history.attempts.get(event_attempt(event))
    name = event.type + (f" #{event.payload.index}" if isinstance(event, SegmentProduced) else "")
    if isinstance(event, JobCompleted) and event.payload.segment is not None:  # its attempt's last, carried
        name += f" +#{event.payload.segment.index}"
    by = f"{event.producer.service}/{event.producer.instance}"
    if attempt is not None and event.producer.service == "worker":
        by += f" ({attempt.host or 'host not recorded'}, {attempt.engine}, {attempt.device})"
    outcome = f"applied -> {entry.state}" if entry.outcome == "applied" else f"{entry.outcome}: {entry.reason}"
    if isinstance(event, JobQueued) and event.payload.degraded_from is not None:
        outcome += f", degraded ({_degraded(history)})"
    if isinstance(event, JobQueued) and event.payload.request.pronunciations:
        said = ", ".join(f"{word} /{ph}/" for word, ph in sorted(event.payload.request.pronunciations.items()))
        outcome += f", pronunciations ({said})"
    if isinstance(event, JobClaimed | JobCompleted) and event.payload.waited is not None:
        outcome += f", waited behind {_waited(event.payload.waited)}"
    where = f"{at.partition}:{at.offset}"
    appended = _time(entry.logged.appended_at)
    return f"{where:<10} {appended:<23} {event_attempt(event):>3}  {name:<18} {by:<34} {outcome}"


def _degraded(history: JobHistory) -> str:
    """What degraded mode changed in the job's request: ``speed 1.0 -> 1.15, 24000 -> 16000 Hz (why)``."""
    asked, request = history.degraded_from, history.request
    if asked is None or request is None:
        return ""
    changed = [f"speed {asked.speed:g} -> {request.speed:g}"] if asked.speed != request.speed else []
    if asked.sample_rate != request.sample_rate:
        changed.append(f"{asked.sample_rate} -> {request.sample_rate} Hz")
    return ", ".join(changed) + (f" ({asked.reason})" if asked.reason else "")


def fingerprint_report(fingerprint: str, histories: list[JobHistory]) -> list[str]:
    """Every job of one fingerprint, for a terminal."""
    if not histories:
        return [f"fingerprint {fingerprint}: no job in the log"]
    lines = [f"fingerprint {fingerprint}: {len(histories)} job(s)", ""]
    lines.append(f"{'job':<36}  {'queued (UTC)':<23} {'state':<9} {'attempts':>8}  audio")
    for h in histories:
        queued = h.entries[0].logged.event.occurred_at
        state = h.status.state if h.status else "unknown"
        source = f"reused from {h.reused_from}" if h.reused_from else ("synthesized" if h.attempts else "-")
        lines.append(f"{h.job_id!s:<36}  {_time(queued):<23} {state:<9} {len(h.attempts):>8}  {source}")
    return lines
