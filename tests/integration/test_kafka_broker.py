from __future__ import annotations

from foundation.settings import default_cache_root
from infra.kafka_broker import KafkaBroker, KafkaBrokerConfig
from tests.support.stack import free_port


def test_regression_cluster_id_starting_with_dash_formats(stack, tmp_path):
    """A random id such as '-Xk…' was read by the storage tool as an option and formatting failed."""
    broker = KafkaBroker(
        KafkaBrokerConfig(
            home=tmp_path,
            port=free_port(),
            controller_port=free_port(),
            heap="256m",
            jar_cache=default_cache_root() / "kafka",
        )
    )
    broker.write_properties()
    assert broker.format_storage(cluster_id="-" + "A" * 21)
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-" + "A" * 21 in meta
    assert not broker.format_storage(), "formatted storage is left alone"
