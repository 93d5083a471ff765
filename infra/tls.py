"""The TLS files of a local server (a test stack's broker or PostgreSQL cluster); the default stack has none."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerTls:
    """A server's certificate chain and unencrypted private key (PEM, PKCS#8), and the CA its clients trust
    (which also signs the clients' certificates where a server asks for one)."""

    cert_file: Path
    key_file: Path
    ca_file: Path
