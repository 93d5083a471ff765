"""The replicated local cluster's configuration (infra.kafka_cluster, infra.kafka_replication, voxlog.topics):
replication factor and min.insync.replicas by the number of brokers, one quorum, a data directory and
ports per node. Nothing here starts a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.kafka_access import KafkaAccess, KafkaAccessRefused
from foundation.settings import DevSettings, TopicSettings
from infra.errors import InfraError
from infra.kafka_broker import KafkaBroker
from infra.kafka_cluster import KafkaCluster, KafkaClusterConfig, recorded_size, replicas_status
from infra.kafka_health import ClusterHealth
from infra.kafka_replication import min_insync_replicas, replication_properties
from infra.processes import free_port
from tests.support.kafka import hanging_up_listener
from voxlog.devstack import brokers_in, dev_brokers, dev_kafka_ports, dev_stack, free_stack_ports, scratch_stack
from voxlog.errors import TopicMismatch
from voxlog.topics import topic_specs

THREE = [(9092, 9093), (9094, 9095), (9096, 9097)]


def cluster(home: Path, ports: list[tuple[int, int]]) -> KafkaCluster:
    return KafkaCluster(KafkaClusterConfig(home, ports, "256m", home / "jars"))


def properties(node: KafkaBroker) -> dict[str, str]:
    node.write_properties()
    lines = [line for line in node.properties.read_text().splitlines() if not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize(("brokers", "factor", "in_sync"), [(1, "1", "1"), (2, "2", "1"), (3, "3", "2"), (5, "3", "2")])
def test_internal_topics_and_defaults_are_replicated_by_the_number_of_brokers(brokers, factor, in_sync):
    written = replication_properties(brokers)
    assert written == {
        "default.replication.factor": factor,
        "min.insync.replicas": in_sync,
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": in_sync,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": in_sync,
    }


def test_a_write_waits_for_a_majority_of_three_or_more_replicas_else_for_one():
    assert [min_insync_replicas(rf) for rf in (1, 2, 3, 4, 5)] == [1, 1, 2, 3, 3]


def test_three_nodes_share_one_quorum_each_with_its_own_id_data_and_ports(tmp_path):
    nodes = cluster(tmp_path, THREE).nodes
    written = [properties(node) for node in nodes]
    assert [w["node.id"] for w in written] == ["1", "2", "3"]
    quorum = "127.0.0.1:9093,127.0.0.1:9095,127.0.0.1:9097"
    assert {w["controller.quorum.bootstrap.servers"] for w in written} == {quorum}
    assert [w["listeners"] for w in written] == [
        f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}" for port, controller in THREE
    ]
    assert [w["log.dirs"] for w in written] == [str(tmp_path / f"node-{i}" / "data") for i in (1, 2, 3)]
    assert {w["process.roles"] for w in written} == {"broker,controller"}
    assert {(w["default.replication.factor"], w["min.insync.replicas"]) for w in written} == {("3", "2")}
    assert {w["unclean.leader.election.enable"] for w in written} == {"false"}


def test_one_node_keeps_the_single_broker_layout_and_its_own_quorum(tmp_path):
    [node] = cluster(tmp_path, [(9092, 9093)]).nodes
    written = properties(node)
    assert node.data_dir == tmp_path / "data", "an existing single broker's data stays where it was"
    assert written["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert (written["offsets.topic.replication.factor"], written["min.insync.replicas"]) == ("1", "1")


def test_every_client_gets_every_broker_in_its_bootstrap_list(tmp_path):
    assert cluster(tmp_path, THREE).bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    stack = scratch_stack(tmp_path, brokers=3)
    assert len(stack.bootstrap_servers.split(",")) == 3
    assert stack.kafka is stack.cluster.nodes[0]


def test_nodes_whose_ports_overlap_are_refused(tmp_path):
    with pytest.raises(InfraError, match="overlap"):
        cluster(tmp_path, [(9092, 9093), (9093, 9094)])


def test_a_node_of_a_cluster_is_never_formatted_alone(tmp_path):
    node = cluster(tmp_path, THREE).nodes[1]
    node.write_properties()
    with pytest.raises(InfraError, match="formatted with the cluster's voters"):
        node.format_storage()


def test_data_for_one_broker_is_not_started_as_three(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("cluster.id=x\n")  # a single broker's, from before
    assert recorded_size(tmp_path) == 1
    with pytest.raises(InfraError, match=r"is for 1 broker\(s\), not 3.*voxlog dev down --purge"):
        cluster(tmp_path, THREE).start()
    (tmp_path / "cluster.json").write_text(json.dumps({"nodes": 3}))
    assert recorded_size(tmp_path) == 3


def test_the_dev_stack_numbers_its_brokers_ports_from_the_settings(tmp_path):
    settings = DevSettings(dev_home=tmp_path, dev_kafka_port=9092, dev_kafka_controller_port=9093)
    assert dev_kafka_ports(settings, 3) == THREE
    assert dev_brokers(settings) == 1, "a new stack: one broker, unless dev up --brokers says more"
    assert dev_brokers(settings, 3) == 3, "dev up --brokers"
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "cluster.json").write_text(json.dumps({"nodes": 3}))
    assert dev_brokers(settings) == 3, "an existing stack: as many as its data is for"


def test_a_quick_broker_runs_without_the_optimizing_compiler_and_a_full_one_with_it(tmp_path):
    """Tests, fault campaigns and the dev stack start brokers that live minutes: C1 alone halves their start's
    CPU. A benchmark's broker, whose CPU is measured, keeps both compilers."""
    quick = dev_stack(DevSettings(dev_home=tmp_path / "dev"))
    full = scratch_stack(tmp_path / "bench")
    quick_argv = quick.cluster.nodes[0].java_argv("kafka.Kafka")
    full_argv = full.cluster.nodes[0].java_argv("kafka.Kafka")
    assert "-XX:TieredStopAtLevel=1" in quick_argv
    assert "-XX:TieredStopAtLevel=1" not in full_argv
    assert "-Xmx512m" in full_argv
    assert "-Xmx512m" in quick_argv, "the heap is the same either way"
    assert scratch_stack(tmp_path / "t", kafka_jit="quick").cluster.nodes[0].config.jit == "quick"


def test_a_stacks_free_ports_name_every_node():
    ports = free_stack_ports(3)
    assert sorted(ports) == ["controller", "controller-2", "controller-3", "kafka", "kafka-2", "kafka-3", "postgres"]
    assert len(set(ports.values())) == 7
    assert brokers_in(ports) == 3
    assert brokers_in(free_stack_ports()) == 1


@pytest.mark.parametrize(("cluster_default", "factor", "in_sync"), [(1, 1, "1"), (3, 3, "2")])
def test_topics_take_the_clusters_replication_and_a_majority_in_sync(cluster_default, factor, in_sync):
    for spec in topic_specs(TopicSettings()):
        placed = spec.replicated(cluster_default)
        assert (placed.replication_factor, placed.config["min.insync.replicas"]) == (factor, in_sync)
        assert {k: v for k, v in placed.config.items() if k != "min.insync.replicas"} == spec.config


def test_topic_replication_settings_win_over_the_clusters():
    [jobs, *_] = topic_specs(TopicSettings(topic_replication_factor=3, topic_min_insync_replicas=3))
    placed = jobs.replicated(1)
    assert (placed.replication_factor, placed.config["min.insync.replicas"]) == (3, "3")
    [jobs, *_] = topic_specs(TopicSettings(topic_replication_factor=2, topic_min_insync_replicas=3))
    with pytest.raises(TopicMismatch, match="VOXLOG_TOPIC_MIN_INSYNC_REPLICAS"):
        jobs.replicated(3)


def test_status_counts_and_names_the_under_replicated_partitions():
    healthy = ClusterHealth({1: "a:1", 2: "a:2", 3: "a:3"}, 2, (), ())
    assert replicas_status(healthy).up
    assert replicas_status(healthy).detail == "0 under-replicated partition(s)"
    lacking = ClusterHealth({1: "a:1", 2: "a:2"}, 1, ("jobs/0", "jobs/3"), ())
    assert not replicas_status(lacking).up
    assert replicas_status(lacking).detail == "2 under-replicated partition(s): jobs/0, jobs/3"
    assert not replicas_status(None).up


async def test_a_refusal_is_found_past_a_bootstrap_server_that_is_down():
    """A cluster's list names brokers that may be down: the one that answers says why it refuses."""

    async with hanging_up_listener() as port:
        access = KafkaAccess(f"127.0.0.1:{free_port()},127.0.0.1:{port}")
        unavailable = await access.unavailable("cannot connect the producer", OSError("closed"))
    assert isinstance(unavailable, KafkaAccessRefused)
