"""foundation.kafka_access: settings become every Kafka client's options in one place, secrets never printed."""

from __future__ import annotations

import re
import ssl
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from foundation.errors import BrokerUnavailable
from foundation.kafka_access import KafkaAccess, KafkaAccessInvalid, KafkaAccessRefused
from foundation.settings import KafkaSettings
from infra.processes import free_port
from tests.support.credentials import Credentials, make_credentials
from tests.support.kafka import hanging_up_listener

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-kafka-password"
CLIENT = re.compile(r"AIOKafka(Consumer|Producer|AdminClient|Client)\(")


@pytest.fixture(scope="module")
def credentials(tmp_path_factory) -> Credentials:
    return make_credentials(tmp_path_factory.mktemp("credentials"))


def sasl_ssl(credentials: Credentials, **changes) -> KafkaAccess:
    fields = {
        "bootstrap_servers": "broker:9093",
        "security_protocol": "SASL_SSL",
        "sasl_username": "voxlog",
        "sasl_password": SecretStr(SECRET),
        "ssl_ca_file": credentials.ca,
        **changes,
    }
    return KafkaAccess(**fields)


def test_plaintext_is_the_default_and_adds_no_tls_and_no_login():
    assert KafkaAccess("h:9092").client_options() == {"bootstrap_servers": "h:9092", "security_protocol": "PLAINTEXT"}


def test_sasl_ssl_gives_a_verifying_tls_context_and_the_scram_login(credentials):
    options = sasl_ssl(credentials, sasl_mechanism="SCRAM-SHA-256").client_options()
    context = options.pop("ssl_context")
    assert options == {
        "bootstrap_servers": "broker:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "voxlog",
        "sasl_plain_password": SECRET,
    }
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert [dict(entry[0] for entry in ca["subject"]) for ca in context.get_ca_certs()] == [
        {"commonName": "voxlog test CA"}
    ]


def test_ssl_alone_has_no_login_and_may_skip_the_hostname_check(credentials):
    access = KafkaAccess(
        "broker:9093",
        "SSL",
        ssl_ca_file=credentials.ca,
        ssl_cert_file=credentials.client_cert,
        ssl_key_file=credentials.client_key,
        ssl_check_hostname=False,
    )
    options = access.client_options()
    assert set(options) == {"bootstrap_servers", "security_protocol", "ssl_context"}
    assert not options["ssl_context"].check_hostname
    assert options["ssl_context"].verify_mode == ssl.CERT_REQUIRED, "the chain is still verified"


async def test_every_client_gets_the_options(credentials):
    access = sasl_ssl(credentials)
    consumer, producer, admin = access.consumer("jobs", group_id=None), access.producer(acks="all"), access.admin()
    for client in (consumer._client, producer.client, admin._client):
        assert client._security_protocol == "SASL_SSL"
        assert client._sasl_mechanism == "SCRAM-SHA-512"
        assert client._sasl_plain_password == SECRET
        assert client._ssl_context is not None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"security_protocol": "SASL_SSL", "sasl_password": SecretStr(SECRET)}, "set VOXLOG_KAFKA_SASL_USERNAME"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_username": "u"}, "VOXLOG_KAFKA_SASL_PASSWORD_FILE"),
        ({"sasl_username": "u", "sasl_password": SecretStr(SECRET)}, "PLAINTEXT, which has no login"),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_username": "u",
                "sasl_password": SecretStr(SECRET),
                "ssl_ca_file": Path("ca.pem"),
            },
            "which has no TLS",
        ),
        ({"security_protocol": "SSL", "ssl_key_file": Path("k.pem")}, "KEY_FILE is set without"),
    ],
)
def test_settings_that_do_not_fit_together_are_refused_by_name_never_by_value(fields, says):
    with pytest.raises(KafkaAccessInvalid, match=says) as refused:
        KafkaAccess("h:9092", **fields)
    assert SECRET not in str(refused.value)


def test_the_password_never_prints(credentials):
    access = sasl_ssl(credentials)
    assert SECRET not in repr(access)
    assert SECRET not in str(access)
    assert access.describe() == "broker:9093 (SASL_SSL, SCRAM-SHA-512 as 'voxlog')"


def test_a_tls_file_that_cannot_be_read_is_named(tmp_path, credentials):
    with pytest.raises(KafkaAccessInvalid, match=r"VOXLOG_KAFKA_SSL_CA_FILE .*missing\.pem"):
        sasl_ssl(credentials, ssl_ca_file=tmp_path / "missing.pem").client_options()


def test_an_encrypted_client_key_is_refused_rather_than_prompted_for(tmp_path, credentials):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=c", "-passout", "pass:key-password"],
        check=True, capture_output=True,
    )  # fmt: skip
    with pytest.raises(KafkaAccessInvalid, match="an encrypted key is not supported"):
        sasl_ssl(credentials, ssl_cert_file=cert, ssl_key_file=key).ssl_context()


async def test_a_broker_that_is_not_there_is_unavailable_not_a_refusal():
    access = KafkaAccess(f"127.0.0.1:{free_port()}")
    assert await access.refusal() is None
    unavailable = await access.unavailable("cannot connect the producer", OSError("refused"))
    assert type(unavailable) is BrokerUnavailable
    assert "127.0.0.1" in str(unavailable)


async def test_a_client_that_cannot_start_is_closed_and_says_where_it_tried():
    access = KafkaAccess(f"127.0.0.1:{free_port()}")
    consumer = access.consumer(request_timeout_ms=2000)
    with pytest.raises(BrokerUnavailable, match=r"cannot read the log: Kafka at 127\.0\.0\.1:\d+ \(PLAINTEXT\)"):
        await access.start(consumer, "cannot read the log")
    assert consumer._closed, "stopped, not left with its tasks"


async def test_a_listener_that_hangs_up_at_the_first_request_is_a_refusal_that_says_so():
    """What a PLAINTEXT client meets at a TLS listener: the broker closes the connection unanswered."""

    async with hanging_up_listener() as port:
        access = KafkaAccess(f"127.0.0.1:{port}")
        unavailable = await access.unavailable("cannot connect the producer", OSError("closed"))
    assert isinstance(unavailable, KafkaAccessRefused)
    assert "a TLS listener, read as PLAINTEXT?" in str(unavailable)


def test_settings_make_the_access_and_read_the_password_from_a_file(tmp_path, monkeypatch, credentials):
    secret_file = tmp_path / "password"
    secret_file.write_text(SECRET + "\n")
    monkeypatch.setenv("VOXLOG_KAFKA_BOOTSTRAP_SERVERS", "broker:9093")
    monkeypatch.setenv("VOXLOG_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("VOXLOG_KAFKA_SASL_USERNAME", "voxlog")
    monkeypatch.setenv("VOXLOG_KAFKA_SASL_PASSWORD_FILE", str(secret_file))
    monkeypatch.setenv("VOXLOG_KAFKA_SSL_CA_FILE", str(credentials.ca))
    assert KafkaSettings().kafka_access() == sasl_ssl(credentials)

    monkeypatch.setenv("VOXLOG_KAFKA_SASL_PASSWORD", "another")
    with pytest.raises(KafkaAccessInvalid, match="not both"):
        KafkaSettings().kafka_access()
    monkeypatch.delenv("VOXLOG_KAFKA_SASL_PASSWORD")
    secret_file.unlink()
    with pytest.raises(KafkaAccessInvalid, match="cannot read VOXLOG_KAFKA_SASL_PASSWORD_FILE"):
        KafkaSettings().kafka_access()


def test_the_environment_of_an_access_gives_it_back(monkeypatch, credentials):
    """How a parent (the dev stack, a deployment, a test) hands its access to the processes it starts."""
    for access in (
        KafkaAccess("h:9092"),
        sasl_ssl(credentials, ssl_cert_file=credentials.client_cert, ssl_key_file=credentials.client_key),
        sasl_ssl(credentials, sasl_mechanism="SCRAM-SHA-256", ssl_check_hostname=False),
    ):
        for key, value in KafkaSettings.environment_of(access).items():
            monkeypatch.setenv(key, value)
        assert KafkaSettings().kafka_access() == access
        for key in KafkaSettings.environment_of(access):
            monkeypatch.delenv(key)


def test_no_kafka_client_is_made_but_through_an_access():
    """A client made any other way connects in the clear, without a login. The local cluster's readiness
    and health probes (infra, which cannot import foundation) are handed the access's options instead."""
    found = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if relative.parts[0].startswith(".") or relative == Path("foundation/kafka_access.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if CLIENT.search(line) and not (relative == Path("infra/kafka_health.py") and "**(security" in line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []
