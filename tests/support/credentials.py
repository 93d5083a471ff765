"""Credentials made for one test: a CA, a server and a client certificate (openssl), random passwords.

Nothing here is a fixed secret: every password is drawn anew, so a test that looks for them in
logs finds only what leaked in that run.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from foundation.kafka_access import KafkaAccess, SaslMechanism
from infra.kafka_broker import SaslSslListener
from infra.stack import StackSecurity
from infra.tls import ServerTls

KAFKA_USER = "voxlog"
BROKER_USER = "broker"
DAYS = "2"


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"openssl {args[0]} failed: {result.stderr[-1500:]}")


def _sign(directory: Path, name: str, subject: str, extensions: str) -> tuple[Path, Path]:
    """A key and a certificate for ``name``, signed by the CA in ``directory``."""
    key, request, cert, ext = (directory / f"{name}{suffix}" for suffix in (".key", ".csr", ".pem", ".ext"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request), "-subj", subject)
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(directory / "ca.pem"), "-CAkey", str(directory / "ca.key"),
        "-CAcreateserial", "-days", DAYS, "-out", str(cert), "-extfile", str(ext),
    )  # fmt: skip
    return cert, key


@dataclass(frozen=True)
class Credentials:
    """Everything a secure test stack is made with, and how a client logs in to it."""

    ca: Path
    server: ServerTls
    client_cert: Path
    client_key: Path
    kafka_password: str = field(repr=False)
    broker_password: str = field(repr=False)
    postgres_password: str = field(repr=False)

    def secrets(self) -> list[str]:
        return [self.kafka_password, self.broker_password, self.postgres_password]

    def kafka(
        self,
        bootstrap_servers: str,
        *,
        password: str | None = None,
        mechanism: SaslMechanism = "SCRAM-SHA-512",
        client_cert: bool = True,
    ) -> KafkaAccess:
        """SASL_SSL as the voxlog user (with ``password`` instead of its own: a wrong one), trusting the CA."""
        return KafkaAccess(
            bootstrap_servers,
            "SASL_SSL",
            mechanism,
            KAFKA_USER,
            SecretStr(self.kafka_password if password is None else password),
            self.ca,
            self.client_cert if client_cert else None,
            self.client_key if client_cert else None,
        )

    def stack_security(self) -> StackSecurity:
        """A broker that asks every client for a certificate besides its login, and PostgreSQL over TLS only."""
        listener = SaslSslListener(
            self.server,
            {BROKER_USER: self.broker_password, KAFKA_USER: self.kafka_password},
            BROKER_USER,
            client_auth="required",
        )
        probe = self.kafka("unused:9092").security_options()
        return StackSecurity(listener, self.server, self.postgres_password, probe)


def make_ca(directory: Path) -> Path:
    """A CA of its own in ``directory`` (ca.pem, and ca.key to sign with); returns its certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "ca.key"),
        "-out", str(directory / "ca.pem"), "-days", DAYS, "-subj", "/CN=voxlog test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return directory / "ca.pem"


def make_credentials(directory: Path) -> Credentials:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, and fresh passwords."""
    ca = make_ca(directory)
    server_cert, server_key = _sign(
        directory,
        "server",
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    client_cert, client_key = _sign(directory, "client", f"/CN={KAFKA_USER}", "extendedKeyUsage=clientAuth\n")
    return Credentials(
        ca=ca,
        server=ServerTls(server_cert, server_key, ca),
        client_cert=client_cert,
        client_key=client_key,
        kafka_password=secrets.token_hex(16),
        broker_password=secrets.token_hex(16),
        postgres_password=secrets.token_hex(16),
    )
