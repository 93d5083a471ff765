"""What a Kafka cluster says of itself: its brokers, the active KRaft controller, and the partitions that
lack a replica (under-replicated) or a leader.

One metadata request to any broker of the bootstrap list gives the brokers that are registered and
unfenced, and each partition's replicas, in-sync replicas and leader. The active controller is not in
it (in KRaft a metadata response names a random broker as the "controller"), so the DescribeQuorum
request asks for the leader of the metadata log's quorum: aiokafka has no class for it, so its version 0
is declared here, field for field as Kafka's ``DescribeQuorumRequest.json`` has it.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.types import CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields
from aiokafka.structs import TopicPartition

METADATA_LOG: Final = "__cluster_metadata"
_REPLICA_STATE: Final = (("replica_id", Int32), ("log_end_offset", Int64), ("tags", TaggedFields))


class DescribeQuorumResponse_v0(Response):
    API_KEY = 55
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("error_code", Int16),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("high_watermark", Int64),
                        ("current_voters", CompactArray(*_REPLICA_STATE)),
                        ("observers", CompactArray(*_REPLICA_STATE)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeQuorumRequest_v0(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 55
    API_VERSION = 0
    RESPONSE_TYPE = DescribeQuorumResponse_v0
    SCHEMA = Schema(
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                ("partitions", CompactArray(("partition_index", Int32), ("tags", TaggedFields))),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeQuorumRequest(Request[DescribeQuorumRequest_v0]):
    """The quorum of the metadata log (a broker forwards it to the active controller)."""

    API_KEY = 55

    def build(self, request_struct_class: type[DescribeQuorumRequest_v0]) -> DescribeQuorumRequest_v0:
        return request_struct_class([(METADATA_LOG, [(0, {})], {})], {})


@dataclass(frozen=True)
class ClusterHealth:
    brokers: Mapping[int, str]  # node id -> host:port of the registered, unfenced brokers
    controller: int | None  # the active controller's node id (None: the quorum did not say)
    under_replicated: tuple[str, ...]  # topic/partition with fewer in-sync replicas than replicas
    leaderless: tuple[str, ...]  # topic/partition with no leader: neither readable nor writable
    leaders: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # topic -> partition -> leader (-1: none)

    def busiest_leader(self, topic: str) -> tuple[int, int]:
        """The node that leads most of ``topic``'s partitions, and how many it leads (lowest node id on a tie)."""
        led = Counter(leader for leader in self.leaders.get(topic, {}).values() if leader >= 0)
        if not led:
            raise KeyError(f"no partition of {topic} has a leader")
        return min(led.items(), key=lambda item: (-item[1], item[0]))


@contextlib.contextmanager
def quiet_client_logs() -> Iterator[None]:
    """A refused connection is the expected answer while a broker starts or is down: do not log it."""
    logger = logging.getLogger("aiokafka")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


async def cluster_health(
    bootstrap_servers: str, security: Mapping[str, Any] | None = None, *, timeout_ms: int = 3000
) -> ClusterHealth:
    """Ask any broker of ``bootstrap_servers`` (aiokafka's ``security`` options); KafkaError or OSError when
    none answers."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=timeout_ms, **(security or {}))
    with quiet_client_logs():
        try:
            await client.bootstrap()
            node = client.get_random_node()
            metadata = (await client.send(node, MetadataRequest(None))).to_object()
            controller = await _active_controller(client, node)
        finally:
            await client.close()
    brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in metadata["brokers"]}
    partitions = [(t["topic"], p) for t in metadata["topics"] for p in t["partitions"]]
    return ClusterHealth(
        brokers=dict(sorted(brokers.items())),
        controller=controller,
        under_replicated=tuple(sorted(f"{t}/{p['partition']}" for t, p in partitions if _lacking(p))),
        leaderless=tuple(sorted(f"{t}/{p['partition']}" for t, p in partitions if p["leader"] < 0)),
        leaders={t["topic"]: {p["partition"]: p["leader"] for p in t["partitions"]} for t in metadata["topics"]},
    )


def _lacking(partition: Mapping[str, Any]) -> bool:
    return len(partition["isr"]) < len(partition["replicas"])


async def _active_controller(client: AIOKafkaClient, node: int) -> int | None:
    try:
        answer = (await client.send(node, DescribeQuorumRequest())).to_object()
    except KafkaError:  # an election in progress, or a broker that does not forward the request
        return None
    quorum = [p for t in answer["topics"] for p in t["partitions"]]
    if answer["error_code"] or not quorum or quorum[0]["error_code"] or quorum[0]["leader_id"] < 0:
        return None
    leader: int = quorum[0]["leader_id"]
    return leader


async def probe_metadata(bootstrap_servers: str, security: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """One metadata round trip, with aiokafka's ``security`` options: (ready, description)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=3000, **(security or {}))
    with quiet_client_logs():
        try:
            await client.bootstrap()
            metadata = await client.fetch_all_metadata()
        except (TimeoutError, KafkaError, OSError) as exc:
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            await client.close()
    brokers = metadata.brokers()
    if not brokers:
        return False, "no broker registered yet"
    leaderless = [
        f"{topic}/{partition}"
        for topic in metadata.topics()
        for partition in metadata.partitions_for_topic(topic) or ()
        if _leader(metadata.leader_for_partition(TopicPartition(topic, partition))) < 0
    ]
    if leaderless:
        return False, f"{len(leaderless)} partitions without a leader"
    return True, f"{len(brokers)} broker(s), {len(metadata.topics())} topic(s)"


def _leader(node_id: int | None) -> int:
    return -1 if node_id is None else node_id
