"""How every Kafka client voxlog creates reaches the brokers and logs in: the one source of their options.

Every producer, consumer and admin client (the services', the CLI tools', the benchmarks' and the
tests') is made by a :class:`KafkaAccess`, which ``KafkaSettings.kafka_access`` builds from the
``VOXLOG_KAFKA_*`` settings: the bootstrap servers and the security protocol, PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL, with a SCRAM login and the TLS files. A client made any other way
would connect in the clear without a login, so nothing else constructs one (a unit test greps).

The password is a ``SecretStr``: the access prints it as stars (in reprs and in every message
here); its value goes only to aiokafka's clients, and to the environment of a process started
with the access (``KafkaSettings.environment_of``).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import collect_hosts, create_conn
from aiokafka.errors import BrokerResponseError, KafkaError
from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr

from foundation.errors import BrokerUnavailable, FoundationError

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256"]

_TLS: Final = frozenset({"SSL", "SASL_SSL"})
_SASL: Final = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
_REFUSAL_WITHIN_MS: Final = 5000
RETRY_BACKOFF_MS: Final = 500
"""Every client's ``retry_backoff_ms`` (unless it is given another): aiokafka retries a broker that is away at
this fixed interval in each of its own loops (connections, metadata, fetches, the group coordinator, the
producer's sends). At its default, 100 ms, an idle worker whose broker was gone spent 3.9% of a core on
them; at 1,000 ms, 0.7%. It also delays a retry after a transient error on a healthy cluster (a group
coordinator still loading, a commit during a rebalance) by as much: 500 ms splits the difference."""


NO_PASSWORD: Final = SecretStr("")


class KafkaAccessInvalid(FoundationError):
    """The Kafka security settings do not fit together, or a file they name cannot be used."""


class KafkaAccessRefused(BrokerUnavailable):
    """The broker answered but refused this client: its login, or the TLS handshake (a certificate).

    An outage as far as callers go (nothing was recorded, a process waits and says why), but no
    retry helps until the credentials or the certificates are fixed.
    """


@dataclass(frozen=True)
class KafkaAccess:
    """The bootstrap servers and how to log in to them; every client's connection options come from here."""

    bootstrap_servers: str
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "SCRAM-SHA-512"
    sasl_username: str = ""
    sasl_password: SecretStr = NO_PASSWORD
    ssl_ca_file: Path | None = None
    ssl_cert_file: Path | None = None
    ssl_key_file: Path | None = None
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise KafkaAccessInvalid(problem)

    def _problem(self) -> str:
        """What does not fit together, said with the settings' names (never their values)."""
        protocol = f"VOXLOG_KAFKA_SECURITY_PROTOCOL is {self.security_protocol}"
        if self.security_protocol in _SASL:
            if not self.sasl_username:
                return f"{protocol}: set VOXLOG_KAFKA_SASL_USERNAME"
            if not self.sasl_password.get_secret_value():
                return f"{protocol}: set VOXLOG_KAFKA_SASL_PASSWORD or VOXLOG_KAFKA_SASL_PASSWORD_FILE"
        elif self.sasl_username or self.sasl_password.get_secret_value():
            return f"{protocol}, which has no login: the SASL username and password would not be used"
        if self.security_protocol not in _TLS and (self.ssl_ca_file or self.ssl_cert_file or self.ssl_key_file):
            return f"{protocol}, which has no TLS: the VOXLOG_KAFKA_SSL_* files would not be used"
        if self.ssl_key_file and not self.ssl_cert_file:
            return "VOXLOG_KAFKA_SSL_KEY_FILE is set without VOXLOG_KAFKA_SSL_CERT_FILE"
        return ""

    @property
    def tls(self) -> bool:
        return self.security_protocol in _TLS

    @property
    def sasl(self) -> bool:
        return self.security_protocol in _SASL

    def describe(self) -> str:
        """Who connects where, for messages: the servers, the protocol and the login's name."""
        login = f", {self.sasl_mechanism} as {self.sasl_username!r}" if self.sasl else ""
        return f"{self.bootstrap_servers} ({self.security_protocol}{login})"

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that verifies the brokers against the CA file (else the system's CAs) and, if
        configured, presents the client certificate. Read afresh for each client: a renewed file is used."""
        try:
            context = create_ssl_context(
                cafile=self.ssl_ca_file,
                certfile=self.ssl_cert_file,
                keyfile=self.ssl_key_file,
                # An encrypted key would make OpenSSL prompt on the terminal; an empty password refuses it.
                password=lambda: "",
            )
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise KafkaAccessInvalid(
                f"cannot use the Kafka TLS files (VOXLOG_KAFKA_SSL_CA_FILE {self.ssl_ca_file}, _CERT_FILE "
                f"{self.ssl_cert_file}, _KEY_FILE {self.ssl_key_file}; an encrypted key is not supported): {exc}"
            ) from exc
        context.check_hostname = self.ssl_check_hostname
        return context

    def security_options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for the protocol, the TLS context and the login."""
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return options

    def client_options(self) -> dict[str, Any]:
        """Every connection option of an aiokafka client: the bootstrap servers and the security options."""
        return {"bootstrap_servers": self.bootstrap_servers, **self.security_options()}

    def consumer(self, *topics: str, **options: Any) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(*topics, **self._with(options))

    def producer(self, **options: Any) -> AIOKafkaProducer:
        return AIOKafkaProducer(**self._with(options))

    def admin(self, **options: Any) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(**self._with(options))

    def _with(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**self.client_options(), "retry_backoff_ms": RETRY_BACKOFF_MS, **options}

    async def refusal(self) -> str | None:
        """Why the bootstrap servers refuse this client (its login or the TLS handshake): the first that
        answers, in the order given (one that cannot be reached is passed over, as a client passes over it);
        None when one takes it or none can be reached. aiokafka's bootstrap says only that it could not connect."""
        for host, port, _ in collect_hosts(self.bootstrap_servers, randomize=False):
            try:
                conn = await create_conn(host, port, request_timeout_ms=_REFUSAL_WITHIN_MS, **self.security_options())
            except ssl.SSLError as exc:  # before OSError, which it is
                return f"the TLS handshake failed: {exc}"
            except BrokerResponseError as exc:  # the broker's answer to the SASL handshake or the login
                return str(exc)
            except (KafkaError, OSError, TimeoutError) as exc:
                closed = self._closed_on(exc)
                if closed is not None:
                    return closed
                continue
            conn.close()
            return None
        return None

    def _closed_on(self, exc: BaseException) -> str | None:
        """What a connection closed at its first request says, if anything: a TLS alert (the broker refused
        the client's certificate, or asked for one), or a TLS listener read as PLAINTEXT; else unreachable."""
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake failed: {cause}"
        if isinstance(cause, asyncio.IncompleteReadError) and not self.tls:
            return f"it closed the connection at the first request (a TLS listener, read as {self.security_protocol}?)"
        return None

    async def start(self, client: AIOKafkaConsumer | AIOKafkaProducer | AIOKafkaAdminClient, what: str) -> None:
        """Start a client made here; one that cannot start is closed, and :meth:`unavailable` says why."""
        try:
            await client.start()
        except (KafkaError, OSError) as exc:
            await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
            raise await self.unavailable(what, exc) from exc

    async def unavailable(self, what: str, exc: BaseException) -> BrokerUnavailable:
        """The error for a client that could not start: :class:`KafkaAccessRefused` when the broker refuses
        this client, else :class:`BrokerUnavailable`, each saying who connected where."""
        refused = await self.refusal()
        if refused is not None:
            return KafkaAccessRefused(f"{what}: Kafka at {self.describe()} refused this client: {refused}")
        return BrokerUnavailable(f"{what}: Kafka at {self.describe()} did not answer: {exc}")
