"""The test stack's credentials (infra): a SASL_SSL broker and PostgreSQL over TLS only; the default stack as it was."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from infra.kafka_broker import KafkaBroker, KafkaBrokerConfig, SaslSslListener
from infra.postgres_cluster import PostgresCluster, PostgresClusterConfig
from tests.support.credentials import Credentials, make_credentials

PLAINTEXT_LISTENER = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
}


@pytest.fixture(scope="module")
def credentials(tmp_path_factory) -> Credentials:
    return make_credentials(tmp_path_factory.mktemp("credentials"))


def properties(broker: KafkaBroker) -> dict[str, str]:
    broker.write_properties()
    lines = [line for line in broker.properties.read_text().splitlines() if not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def broker(home: Path, listener: SaslSslListener | None = None) -> KafkaBroker:
    return KafkaBroker(KafkaBrokerConfig(home, 9092, 9093, "256m", home / "jars", listener=listener))


def test_the_default_broker_is_plaintext_with_no_login(tmp_path):
    plain = broker(tmp_path)
    written = properties(plain)
    assert {key: written[key] for key in PLAINTEXT_LISTENER} == PLAINTEXT_LISTENER
    assert not [key for key in written if "sasl" in key or "ssl" in key or key == "super.users"]
    assert plain._scram_arguments() == []


def test_a_sasl_ssl_broker_takes_scram_logins_over_tls_and_keeps_the_controller_plaintext(tmp_path, credentials):
    listener = SaslSslListener(credentials.server, {"broker": "b-pass", "voxlog": "v-pass"}, "broker", "required")
    secure = broker(tmp_path, listener)
    written = properties(secure)
    assert written["listeners"] == "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert written["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL"
    assert written["inter.broker.listener.name"] == "SASL_SSL"
    assert written["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
    for mechanism in ("scram-sha-512", "scram-sha-256"):
        jaas = written[f"listener.name.sasl_ssl.{mechanism}.sasl.jaas.config"]
        assert 'username="broker" password="b-pass";' in jaas
    assert written["listener.name.sasl_ssl.ssl.client.auth"] == "required", "the global ssl.client.auth is SSL's"
    keystore = Path(written["ssl.keystore.location"])
    assert keystore.read_text() == credentials.server.key_file.read_text() + credentials.server.cert_file.read_text()
    assert written["ssl.truststore.location"] == str(credentials.ca)
    for private in (keystore, secure.properties):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert sorted(secure._scram_arguments()) == sorted(
        f"--add-scram={m}=[name={n},password={p}]"
        for n, p in (("broker", "b-pass"), ("voxlog", "v-pass"))
        for m in ("SCRAM-SHA-512", "SCRAM-SHA-256")
    )


def test_a_tls_cluster_takes_tcp_over_tls_only_with_its_password(tmp_path, credentials):
    config = PostgresClusterConfig(tmp_path, 5433, tls=credentials.server, password="pg-pass")
    cluster = PostgresCluster(config)
    cluster.data_dir.mkdir(parents=True)
    conf = cluster._tls_conf()
    assert conf == "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
    assert stat.S_IMODE((cluster.data_dir / "server.key").stat().st_mode) == 0o600, "PostgreSQL refuses a readable key"
    rules = [line.split() for line in (cluster.data_dir / "pg_hba.conf").read_text().splitlines() if line[:1] != "#"]
    assert rules == [
        ["local", "all", "all", "trust"],
        ["hostssl", "all", "all", "127.0.0.1/32", "scram-sha-256"],
        ["hostnossl", "all", "all", "all", "reject"],
    ]
    assert PostgresCluster(PostgresClusterConfig(tmp_path / "plain", 5434))._tls_conf() == ""
