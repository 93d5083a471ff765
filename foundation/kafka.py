"""The Kafka adapter every process shares: publishing events with their headers.

Records are keyed by the request fingerprint. A job's events go to the
partition its ``JobQueued`` was placed in (``partition``; the API's routing
chooses it, see ``producers.placement``), and where nobody chose one, aiokafka's
default partitioner (murmur2, the same as the Java client's) picks the
fingerprint's: either way every event of a job is in one partition, in order. The producer is idempotent with
``acks=all``: a record is reported published only once every in-sync replica
has it. aiokafka errors are converted here into :class:`BrokerUnavailable`.
Each record's ``traceparent`` names its own span in the trace of the work in
hand (:func:`foundation.tracing.current`: the request, the job's attempt).

The services name what they need from the log as ports of their own
(``consumers.ports.EventLog``, ``producers.ports.JobLog``); these classes
are the adapters the composition root hands them.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from contracts import AnyEvent, encode_event, event_headers, record_key
from foundation import tracing
from foundation.errors import BrokerUnavailable, PublishUnconfirmed
from foundation.kafka_access import KafkaAccess

log = structlog.get_logger("voxlog.kafka")


# The most bytes of one partition's records in one produce batch (aiokafka's default is 16 KiB). A worker
# at a GPU's pace ends a forward's claims together, and their claims' and completions' records carry what
# each waited behind (up to about 4 KB a record): at 16 KiB a batch held a few of them, and the rest of the
# burst waited for the next requests. Measured in scenario (n) (docs/profile.md, "Kafka's produce batches").
PRODUCE_BATCH_BYTES: Final = 128 * 1024


@dataclass(frozen=True)
class RecordPosition:
    """Where a record sits in the log."""

    topic: str
    partition: int
    offset: int


class KafkaEventPublisher:
    """Adapter: an idempotent, ``acks=all`` aiokafka producer on the jobs topic."""

    def __init__(
        self, kafka: KafkaAccess, topic: str, *, client_id: str = "voxlog", request_timeout_ms: int = 15000
    ) -> None:
        self.topic = topic
        self._kafka = kafka
        self._producer = kafka.producer(
            client_id=client_id,
            enable_idempotence=True,
            acks="all",
            # Every publish is awaited on a job's critical path; records that arrive while a
            # request is in flight are batched anyway, so lingering only adds latency
            # (bench: 2 ms of linger cost ~1.5 ms per publish, four publishes per job).
            linger_ms=0,
            max_batch_size=PRODUCE_BATCH_BYTES,
            request_timeout_ms=request_timeout_ms,
        )
        self.unacknowledged = 0  # records handed to the producer whose acknowledgement has not come

    async def start(self) -> None:
        await self._kafka.start(self._producer, "cannot connect the producer")

    async def stop(self) -> None:
        await self._producer.stop()

    def describe_unacknowledged(self) -> str | None:
        """What stopping now would abandon of this producer's records (``None``: nothing)."""
        if not self.unacknowledged:
            return None
        return f"{self.unacknowledged} record(s) Kafka did not acknowledge (dropped: the log still holds every job)"

    async def probe(self) -> None:
        """One metadata round trip to the cluster; :class:`BrokerUnavailable` when it fails."""
        try:
            await self._producer.client.fetch_all_metadata()
        except (KafkaError, OSError) as exc:
            raise BrokerUnavailable(f"Kafka metadata request failed: {exc}") from exc

    async def partition_count(self) -> int:
        """How many partitions the default topic has (:class:`BrokerUnavailable` when metadata cannot tell)."""
        try:
            partitions = await self._producer.partitions_for(self.topic)
        except (KafkaError, OSError) as exc:
            raise BrokerUnavailable(f"cannot read the partitions of {self.topic}: {exc}") from exc
        return len(partitions)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def publish(
        self,
        event: AnyEvent,
        *,
        topic: str | None = None,
        traceparent: str | None = None,
        partition: int | None = None,
    ) -> RecordPosition:
        """Append ``event`` (to the default topic unless ``topic`` is given; to ``partition``, else the
        fingerprint's) and wait for acks=all."""
        return await self.send_raw(
            topic or self.topic, record_key(event), encode_event(event), self._headers(event, traceparent), partition
        )

    async def send(self, event: AnyEvent, partition: int | None = None) -> asyncio.Future[RecordPosition]:
        """Hand ``event`` to the producer without waiting for its acknowledgement: the future resolves to
        its position once acks=all holds, or fails with :class:`BrokerUnavailable`. Events sent one after
        another keep their order in the partition (the producer is idempotent), and those that queue up
        while a request is in flight travel together in the next one."""
        try:
            sent = await self._producer.send(
                self.topic,
                value=encode_event(event),
                key=record_key(event),
                headers=self._headers(event),
                partition=partition,
            )
        except KafkaError as exc:
            raise BrokerUnavailable(f"Kafka did not take a record for {self.topic}: {exc}") from exc
        self.unacknowledged += 1
        sent.add_done_callback(self._one_acknowledged)
        acknowledged: asyncio.Future[RecordPosition] = asyncio.get_running_loop().create_future()
        sent.add_done_callback(lambda done: _convert(done, acknowledged, self.topic))
        return acknowledged

    @staticmethod
    def _headers(event: AnyEvent, traceparent: str | None = None) -> list[tuple[str, bytes]]:
        return event_headers(event, traceparent, trace=tracing.current())

    def _one_acknowledged(self, _: asyncio.Future[Any]) -> None:
        self.unacknowledged -= 1

    async def send_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        partition: int | None = None,
    ) -> RecordPosition:
        """Append an already-encoded record (the DLQ, heartbeats) and wait for its acknowledgement. A caller that
        gives up waiting leaves the record with the producer (it is still counted as not acknowledged)."""
        try:
            sent = await self._producer.send(topic, value=value, key=key, headers=headers, partition=partition)
            self.unacknowledged += 1
            sent.add_done_callback(self._one_acknowledged)
            metadata = await asyncio.shield(sent)
        except KafkaError as exc:
            raise BrokerUnavailable(f"Kafka did not acknowledge a record for {topic}: {exc}") from exc
        return RecordPosition(metadata.topic, metadata.partition, metadata.offset)


def _convert(sent: asyncio.Future[Any], acknowledged: asyncio.Future[RecordPosition], topic: str) -> None:
    """Resolve ``acknowledged`` as aiokafka resolved ``sent``, with aiokafka's errors made ours."""
    if acknowledged.done():
        return
    if sent.cancelled():
        acknowledged.set_exception(BrokerUnavailable(f"the record for {topic} was abandoned before Kafka took it"))
    elif (exc := sent.exception()) is not None:
        failure = BrokerUnavailable(f"Kafka did not acknowledge a record for {topic}: {exc}")
        failure.__cause__ = exc
        acknowledged.set_exception(failure)
    else:
        metadata = sent.result()
        acknowledged.set_result(RecordPosition(metadata.topic, metadata.partition, metadata.offset))


_BULK_RECORDS_PER_S: Final = 2000.0  # the slowest rate a bulk publish is allowed beyond the deadline


class ReconnectingPublisher:
    """A publisher that connects on demand, bounds every publish by a deadline, and starts over after a failure.

    The API starts and answers (503) while Kafka is down: nothing connects until the first publish
    or readiness check. A publish that fails, or is not acknowledged within ``deadline_ms``, drops
    the producer (closed in the background, bounded too) so that the next publish opens a fresh one,
    and raises :class:`BrokerUnavailable`; a caller is never held longer than the deadline.
    """

    def __init__(self, kafka: KafkaAccess, topic: str, *, client_id: str, deadline_ms: int) -> None:
        self._make = lambda: KafkaEventPublisher(kafka, topic, client_id=client_id, request_timeout_ms=deadline_ms)
        self._deadline_s = deadline_ms / 1000
        self._publisher: KafkaEventPublisher | None = None
        self._lock = asyncio.Lock()
        self._closing: set[asyncio.Task[None]] = set()

    async def _connected(self) -> KafkaEventPublisher:
        async with self._lock:
            if self._publisher is None:
                publisher = self._make()
                await publisher.start()
                self._publisher = publisher
            return self._publisher

    async def check(self) -> None:
        """Raise :class:`BrokerUnavailable` unless the broker answers a metadata request within the deadline."""
        try:
            async with asyncio.timeout(self._deadline_s):
                await (await self._connected()).probe()
        except (TimeoutError, BrokerUnavailable) as exc:
            self._drop()
            raise BrokerUnavailable(f"Kafka did not answer within {self._deadline_s:g}s: {exc}") from exc

    async def partition_count(self) -> int:
        """How many partitions the topic has, within the deadline (:class:`BrokerUnavailable` otherwise)."""
        try:
            async with asyncio.timeout(self._deadline_s):
                return await (await self._connected()).partition_count()
        except (TimeoutError, BrokerUnavailable) as exc:
            self._drop()
            raise BrokerUnavailable(f"Kafka did not tell the partitions within {self._deadline_s:g}s: {exc}") from exc

    async def publish(self, event: AnyEvent, partition: int | None = None) -> RecordPosition:
        return (await self.publish_all([event], [partition]))[0]

    async def publish_all(
        self, events: Sequence[AnyEvent], partitions: Sequence[int | None] | None = None
    ) -> list[RecordPosition]:
        """Hand every event over (each to its partition in ``partitions``, else its fingerprint's), then wait
        for all their acknowledgements, within one deadline for the lot."""
        if not events:
            return []
        placed = list(partitions) if partitions is not None else [None] * len(events)
        sent = False
        acks: list[asyncio.Future[RecordPosition]] = []
        limit_s = self._deadline_s + (len(events) - 1) / _BULK_RECORDS_PER_S
        try:
            async with asyncio.timeout(limit_s):
                publisher = await self._connected()
                sent = True
                acks = [await publisher.send(event, p) for event, p in zip(events, placed, strict=True)]
                return list(await asyncio.gather(*acks))
        except (TimeoutError, BrokerUnavailable) as exc:
            asyncio.gather(*acks, return_exceptions=True)  # retrieved: the caller hears of the first failure
            self._drop()
            if sent:
                raise PublishUnconfirmed(
                    f"Kafka did not acknowledge {len(events)} record(s) within {limit_s:g}s ({exc or 'timed out'})"
                ) from exc
            raise BrokerUnavailable(f"cannot reach Kafka: {exc or 'timed out'}") from exc

    def _drop(self) -> None:
        """Forget the current producer and close it in the background (with a broker down, closing waits)."""
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            task = asyncio.create_task(self._close(publisher))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close(self, publisher: KafkaEventPublisher) -> None:
        try:
            async with asyncio.timeout(max(10.0, self._deadline_s)):
                await publisher.stop()
        except TimeoutError:
            log.warning("a dropped Kafka producer did not close in time; its unsent records are abandoned")

    async def stop(self) -> None:
        self._drop()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


def bulk_reader(kafka: KafkaAccess) -> AIOKafkaConsumer:
    """A consumer of no group that reads a whole log (replay, archive): large fetches, as much per
    partition as a fetch may bring, because the fetcher cannot ask for more while a batch is being used."""
    return kafka.consumer(
        enable_auto_commit=False,
        group_id=None,
        max_partition_fetch_bytes=32 * 1024 * 1024,
        fetch_max_bytes=256 * 1024 * 1024,
    )


async def wait_for_partitions(consumer: AIOKafkaConsumer, topic: str, within_s: float = 30.0) -> list[TopicPartition]:
    """The partitions of ``topic`` once metadata knows them (a just-created topic takes a moment)."""
    deadline = time.monotonic() + within_s
    for round_ in itertools.count():
        found = consumer.partitions_for_topic(topic)
        if found:
            return [TopicPartition(topic, p) for p in sorted(found)]
        if time.monotonic() >= deadline:
            break
        if round_:  # the first update asks for a topic the client has not looked up yet: no wait before it
            await asyncio.sleep(0.2)
        try:
            await consumer._client.force_metadata_update()
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot read Kafka metadata: {exc}") from exc
    raise BrokerUnavailable(f"topic {topic} does not exist or has no partitions; run `voxlog topics`")
