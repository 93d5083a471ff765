"""The worker's heartbeat: every few seconds, a ``NodeHeartbeat`` on the control topic.

It says the worker is alive and what it is doing (job, attempt, segments
done, when it last advanced, its measured speed), so that the sweeper can
tell a stuck claim from a slow one without trusting the worker's word that
it is fine: a worker whose heartbeats stop, or whose job stops advancing,
is found out by someone else. One heartbeat is in flight at a time: while
Kafka does not acknowledge it (an idempotent producer retries a record for as
long as the broker is away), no other is sent, the outage is said once and
summarized (:class:`foundation.outages.Outage`), and the next follows its
backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final, Protocol

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from consumers.worker_activity import Activity
from contracts import (
    DecodeError,
    NodeEvent,
    NodeHeartbeat,
    NodeHeartbeatPayload,
    Producer,
    decode_node_event,
    node_event,
    utc_now,
)
from contracts.engine_info import EngineInfo
from contracts.scheduling import HeldClaim, QueueCount, QueuedJob
from foundation.errors import BrokerUnavailable
from foundation.lifecycle import wait_for_stop
from foundation.outages import Outage

SendHeartbeat = Callable[[NodeHeartbeat], Awaitable[object]]


class Schedule(Protocol):
    """What waits on the worker, as its heartbeat tells it (:class:`consumers.run_queue.RunQueue`)."""

    def shown(self) -> tuple[QueuedJob, ...]: ...

    def counts(self) -> tuple[QueueCount, ...]: ...


def heartbeat(
    worker_id: str,
    engine: EngineInfo,
    activity: Activity,
    producer: Producer,
    started_at: datetime,
    schedule: Schedule | None = None,
) -> NodeHeartbeat:
    now = utc_now()
    current = activity.current
    claims = []
    for claim in list(activity.claims.values()):
        progress_at, _ = activity.progress_of(claim)
        claims.append(
            HeldClaim(
                job_id=claim.job_id,
                fingerprint=claim.fingerprint,
                attempt=claim.attempt,
                segments_done=claim.segments_done,
                segments_total=claim.segments_total,
                text_chars=claim.text_chars,
                progress_at=progress_at,
                running=claim.job_id == activity.running,
            )
        )
    return node_event(
        NodeHeartbeat,
        producer,
        NodeHeartbeatPayload(
            worker_id=worker_id,
            engine=engine.name,
            model_version=engine.model_version,
            device=engine.device,
            started_at=started_at,
            sent_at=now,
            job_id=current.job_id if current else None,
            fingerprint=current.fingerprint if current else None,
            attempt=current.attempt if current else None,
            segments_done=current.segments_done if current else 0,
            segments_total=current.segments_total if current else None,
            text_chars=current.text_chars if current else None,
            progress_at=activity.progress_of(current)[0] if current else None,
            chars_per_s=activity.chars_per_s,
            busy_s=activity.busy_s,
            claims=tuple(claims),
            queue=schedule.shown() if schedule is not None else (),
            queue_counts=schedule.counts() if schedule is not None else (),
        ),
        at=now,
    )


async def beat(
    send: SendHeartbeat,
    build: Callable[[], NodeHeartbeat],
    interval_s: float,
    stop: asyncio.Event,
    outage: Outage | None = None,
) -> None:
    """Send a heartbeat every ``interval_s`` until ``stop``: each once the one before is acknowledged; one not
    acknowledged within ``interval_s`` is waited for a backoff longer."""
    outage = outage or Outage("Kafka (heartbeats)")
    in_flight: asyncio.Future[object] | None = None
    try:
        while True:
            if in_flight is None:
                in_flight = asyncio.ensure_future(send(build()))
            done, _ = await asyncio.wait({in_flight}, timeout=interval_s)
            wait_s = interval_s
            if not done:
                wait_s = outage.failed(f"a heartbeat not acknowledged within {interval_s:g}s") - interval_s
            elif isinstance(error := in_flight.exception(), BrokerUnavailable):
                in_flight, wait_s = None, outage.failed(error)
            elif error is not None:
                raise error
            else:
                in_flight = None
                outage.recovered()
            if await wait_for_stop(stop, max(wait_s, 0.0)):
                return
    finally:
        if in_flight is not None:
            in_flight.cancel()


class HeartbeatBook:
    """Every worker's latest heartbeat, read from the control topic (for the sweeper).

    The book knows when it is *live*: it has just read the topic up to its end, as the broker
    confirms. While it is not (the broker is down, the book is catching up), what it holds is old
    news, and silence means nothing: :meth:`heard_since` is ``None``. When it becomes live again,
    silence counts from that moment, since workers could not send heartbeats either.
    """

    LIVE_WITHIN_S: Final = 5.0  # a confirmation older than this and the book is not live

    def __init__(self) -> None:
        self._latest: dict[str, NodeHeartbeatPayload] = {}
        self._live_since: datetime | None = None
        self._confirmed_mono = 0.0

    def latest(self, worker_id: str) -> NodeHeartbeatPayload | None:
        return self._latest.get(worker_id)

    def heard_since(self) -> datetime | None:
        """Since when the book has been reading the topic live; ``None`` while it is not."""
        if self._live_since is None or time.monotonic() - self._confirmed_mono > self.LIVE_WITHIN_S:
            return None
        return self._live_since

    def note(self, event: NodeEvent) -> None:
        if isinstance(event, NodeHeartbeat):
            known = self._latest.get(event.payload.worker_id)
            if known is None or known.sent_at <= event.payload.sent_at:
                self._latest[event.payload.worker_id] = event.payload

    async def follow(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition], stop: asyncio.Event) -> None:
        """Read the control topic from its beginning (it is compacted) and keep reading until ``stop``."""
        beginnings = await consumer.beginning_offsets(partitions)
        for tp in partitions:
            consumer.seek(tp, beginnings[tp])
        outage = Outage("Kafka (the heartbeats on the control topic)")
        while not stop.is_set():
            try:
                batch = await consumer.getmany(*partitions, timeout_ms=500)
                for records in batch.values():
                    for record in records:
                        with contextlib.suppress(DecodeError):
                            self.note(decode_node_event(record.value))
                await self._confirm(consumer, partitions)
            except KafkaError as exc:
                self._live_since = None
                await wait_for_stop(stop, outage.failed(exc))
            else:
                outage.recovered()

    async def _confirm(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        """Ask the broker where the topic ends: caught up with it, the book is live."""
        ends = await consumer.end_offsets(partitions)
        caught_up = all([await consumer.position(tp) >= ends[tp] for tp in partitions])
        if not caught_up:
            self._live_since = None
            return
        if self._live_since is None or time.monotonic() - self._confirmed_mono > self.LIVE_WITHIN_S:
            self._live_since = utc_now()
        self._confirmed_mono = time.monotonic()
