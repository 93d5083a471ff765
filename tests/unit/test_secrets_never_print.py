"""Secrets in the settings (the Kafka password, a database URL's password) never print: not in a settings
object's repr, not in a refused setting's error, not where a URL is shown (infra.postgres_cluster.redact)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from foundation.settings import ALL_SETTINGS, ApiSettings, DevSettings, WorkerSettings
from infra.postgres_cluster import PostgresClusterConfig, redact
from infra.tls import ServerTls
from voxlog.config_docs import settings_rows

KAFKA_SECRET = "kafka-pass-1b6e"
PG_SECRET = "pg-pass-93d0"
URL = f"postgresql://voxlog:{PG_SECRET}@db.internal:5432/voxlog?sslmode=verify-full&sslrootcert=/etc/ca.pem"


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("VOXLOG_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("VOXLOG_KAFKA_SASL_USERNAME", "voxlog")
    monkeypatch.setenv("VOXLOG_KAFKA_SASL_PASSWORD", KAFKA_SECRET)
    monkeypatch.setenv("VOXLOG_DATABASE_URL", URL)


def test_a_settings_object_prints_its_secrets_as_stars(secret_env):
    for settings in (ApiSettings(), WorkerSettings()):
        for shown in (repr(settings), str(settings), settings.model_dump_json()):
            assert KAFKA_SECRET not in shown
            assert PG_SECRET not in shown
        assert settings.database_url.get_secret_value() == URL, "the driver still gets the URL as it is"
        assert settings.kafka_access().sasl_password.get_secret_value() == KAFKA_SECRET
    assert DevSettings().database_url is not None
    assert PG_SECRET not in repr(DevSettings())


def test_a_refused_setting_names_itself_but_shows_no_input(secret_env, monkeypatch):
    monkeypatch.setenv("VOXLOG_DATABASE_SCHEMA", "Bad Schema")
    monkeypatch.setenv("VOXLOG_KAFKA_SECURITY_PROTOCOL", "SASL-SSL")
    with pytest.raises(ValidationError) as refused:
        ApiSettings()
    text = str(refused.value)
    assert "database_schema" in text
    assert "kafka_security_protocol" in text
    for hidden in ("Bad Schema", "SASL-SSL", KAFKA_SECRET, PG_SECRET):
        assert hidden not in text


def test_every_settings_class_hides_input_in_its_errors():
    assert all(cls.model_config.get("hide_input_in_errors") for cls in ALL_SETTINGS)


def test_the_configuration_table_shows_a_secrets_default_as_it_is():
    rows = {row.variable: row for row in settings_rows()}
    assert rows["VOXLOG_DATABASE_URL"].default.startswith("`'postgresql://voxlog@127.0.0.1:55432/voxlog'`")
    assert rows["VOXLOG_KAFKA_SASL_PASSWORD"].default == "`''`"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (URL, "postgresql://voxlog@db.internal:5432/voxlog?sslmode=verify-full&sslrootcert=/etc/ca.pem"),
        ("postgresql://voxlog@127.0.0.1:55432/voxlog", "postgresql://voxlog@127.0.0.1:55432/voxlog"),
        ("postgresql://u:p%40ss@h/db", "postgresql://u@h/db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u@h/db"),
        (
            "postgresql://h/db?user=u&password=secret&sslpassword=k",
            "postgresql://h/db?user=u&password=***&sslpassword=***",
        ),
        ("host=h password=secret dbname=db", "host=h password=*** dbname=db"),
    ],
)
def test_a_url_is_shown_without_its_passwords(url, shown):
    assert redact(url) == shown


def test_the_dev_clusters_url_is_as_it_was_and_a_test_clusters_logs_in_over_tls(tmp_path):
    assert PostgresClusterConfig(tmp_path, 55432).url == "postgresql://voxlog@127.0.0.1:55432/voxlog"
    tls = ServerTls(tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem")
    secure = PostgresClusterConfig(tmp_path, 5433, tls=tls, password="p@ss/word")
    assert (
        secure.url
        == f"postgresql://voxlog:p%40ss%2Fword@127.0.0.1:5433/voxlog?sslmode=verify-full&sslrootcert={tmp_path}/ca.pem"
    )
    assert secure.url_of("postgres").split("?")[0].endswith("/postgres")
