"""A local PostgreSQL cluster from the OS package, or an existing server by URL.

The cluster lives in ``<home>/data``, listens on 127.0.0.1 at the configured
port only, trusts loopback connections (it is a development cluster) and holds
a ``voxlog`` database owned by the ``voxlog`` superuser. When run as root the
server runs as the ``postgres`` OS user, which the Debian package creates.

A test stack's cluster may instead take TCP connections over TLS only
(``ssl = on``, a ``hostssl`` rule and a reject for the rest) and check the
superuser's password (scram-sha-256); its URL then says ``sslmode=verify-full``
with the CA as ``sslrootcert``, which asyncpg reads from the URL.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote, urlencode

import asyncpg

from infra.errors import InfraError
from infra.processes import tail
from infra.status import ServiceStatus
from infra.tls import ServerTls

DEBIAN_PACKAGE: Final = "postgresql"
SERVER_USER: Final = "postgres"


@dataclass(frozen=True)
class PostgresClusterConfig:
    home: Path
    port: int
    database: str = "voxlog"
    user: str = "voxlog"
    host: str = "127.0.0.1"
    tls: ServerTls | None = None  # TCP over TLS only
    password: str | None = None  # the superuser's, set when the cluster is made; checked over TLS

    @property
    def url(self) -> str:
        return self.url_of(self.database)

    def url_of(self, database: str) -> str:
        login = self.user if self.password is None else f"{self.user}:{quote(self.password, safe='')}"
        url = f"postgresql://{login}@{self.host}:{self.port}/{database}"
        if self.tls is None:
            return url
        return url + "?" + urlencode({"sslmode": "verify-full", "sslrootcert": str(self.tls.ca_file)}, safe="/")


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL server binaries, if any."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name), reverse=True
    )
    if candidates:
        return candidates[0].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def install_server() -> Path:
    """Install the OS package (as root), returning the binaries' directory."""
    if os.geteuid() != 0:
        raise InfraError("PostgreSQL is not installed; run `apt-get install postgresql` or set VOXLOG_DATABASE_URL")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", DEBIAN_PACKAGE]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise InfraError(f"`{' '.join(cmd)}` failed:\n{result.stderr[-2000:]}")
    bindir = find_bindir()
    if bindir is None:
        raise InfraError("installed the postgresql package but found no initdb under /usr/lib/postgresql")
    return bindir


class PostgresCluster:
    """Lifecycle of the development cluster."""

    def __init__(self, config: PostgresClusterConfig) -> None:
        self.config = config
        self.data_dir = config.home / "data"
        self.socket_dir = config.home / "run"
        self.log_file = config.home / "postgres.log"

    def _as_server_user(self, argv: Sequence[str]) -> list[str]:
        if os.geteuid() != 0:
            return list(argv)
        return ["runuser", "-u", SERVER_USER, "--", *argv]

    def _run(self, argv: Sequence[str], what: str) -> None:
        result = subprocess.run(self._as_server_user(argv), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise InfraError(f"{what} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}")

    def _prepare_dirs(self) -> None:
        for path in (self.config.home, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            server = pwd.getpwnam(SERVER_USER)
            for path in (self.config.home, self.socket_dir):
                os.chown(path, server.pw_uid, server.pw_gid)

    def init(self, bindir: Path) -> bool:
        """Create the cluster on first use. Returns whether it did."""
        if (self.data_dir / "PG_VERSION").exists():
            return False
        self._prepare_dirs()
        argv = [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", self.config.user]
        argv += ["--auth=trust", "--encoding=UTF8", "--no-locale"]
        if self.config.password is None:
            self._run(argv, "initdb")
            return True
        password_file = self.config.home / "initdb.password"
        self._write_server_file(password_file, self.config.password)
        try:
            self._run([*argv, f"--pwfile={password_file}"], "initdb")
        finally:
            password_file.unlink()
        return True

    def _write_conf(self) -> None:
        body = (
            "# Written by voxlog dev up; edits are overwritten.\n"
            f"port = {self.config.port}\n"
            f"listen_addresses = '{self.config.host}'\n"
            f"unix_socket_directories = '{self.socket_dir}'\n"
            "max_connections = 200\n"
            # Commit times answer "since when could a reader see this row?" (audits, benchmarks).
            "track_commit_timestamp = on\n"
        ) + self._tls_conf()
        self._write_owned(self.data_dir / "voxlog.auto.conf", body)
        main_conf = self.data_dir / "postgresql.conf"
        include = "include_if_exists = 'voxlog.auto.conf'\n"
        text = main_conf.read_text()
        if include not in text:
            self._write_owned(main_conf, text + include)

    def _tls_conf(self) -> str:
        """With TLS: the server's certificate and key (copied, owned by the server, the key private),
        and the client rules: TCP over TLS only, with the password where there is one."""
        tls = self.config.tls
        if tls is None:
            return ""
        self._write_owned(self.data_dir / "server.crt", tls.cert_file.read_text())
        self._write_owned(self.data_dir / "server.key", tls.key_file.read_text(), mode=0o600)
        method = "trust" if self.config.password is None else "scram-sha-256"
        rules = (
            "# Written by voxlog for a test stack; edits are overwritten.\n"
            "local all all trust\n"
            f"hostssl all all {self.config.host}/32 {method}\n"
            "hostnossl all all all reject\n"
        )
        self._write_owned(self.data_dir / "pg_hba.conf", rules)
        return "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"

    def _write_owned(self, path: Path, text: str, mode: int | None = None) -> None:
        """Write a file in the data directory, owned like the directory itself."""
        path.write_text(text)
        if mode is not None:
            path.chmod(mode)
        owner = self.data_dir.stat()
        if os.geteuid() == 0:
            os.chown(path, owner.st_uid, owner.st_gid)

    def _write_server_file(self, path: Path, text: str) -> None:
        """A private file the server's user (``postgres`` when run as root) can read."""
        path.write_text(text)
        path.chmod(0o600)
        if os.geteuid() == 0:
            server = pwd.getpwnam(SERVER_USER)
            os.chown(path, server.pw_uid, server.pw_gid)

    def running(self, bindir: Path) -> bool:
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        argv = self._as_server_user([str(bindir / "pg_ctl"), "-D", str(self.data_dir), "status"])
        return subprocess.run(argv, capture_output=True, check=False).returncode == 0

    def start(self, bindir: Path) -> None:
        if self.running(bindir):
            return
        self._write_conf()
        argv = [str(bindir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "-t", "60", "start"]
        try:
            self._run(argv, "pg_ctl start")
        except InfraError as exc:
            raise InfraError(f"{exc}\nserver log:\n{tail(self.log_file)}") from exc

    def stop(self, bindir: Path) -> None:
        if not self.running(bindir):
            return
        self._run(
            [str(bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop"], "pg_ctl stop"
        )

    async def ensure_database(self, within_s: float) -> None:
        """Wait for the server, then create the voxlog database if it is missing."""
        conn = await connect_with_deadline(self.config.url_of("postgres"), within_s)
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", self.config.database)
            if not exists:
                await conn.execute(f'CREATE DATABASE "{self.config.database}"')
        finally:
            await conn.close()

    def pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (FileNotFoundError, PermissionError, ValueError, IndexError):
            return None


async def connect_with_deadline(url: str, within_s: float) -> asyncpg.Connection:
    """Connect to ``url``, retrying for ``within_s`` seconds while the server starts."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return await asyncpg.connect(url, timeout=5)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            if time.monotonic() >= deadline:
                raise InfraError(f"PostgreSQL at {redact(url)} did not answer within {within_s:.0f}s: {exc}") from exc
            await asyncio.sleep(0.3)


async def probe_database(url: str) -> ServiceStatus:
    """Status of the database at ``url`` (one ``SELECT version()``)."""
    try:
        conn = await asyncpg.connect(url, timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return ServiceStatus("postgres", up=False, endpoint=redact(url), detail=f"{type(exc).__name__}: {exc}")
    try:
        version = await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()
    return ServiceStatus("postgres", up=True, endpoint=redact(url), detail=f"PostgreSQL {version}")


_PASSWORD_PARAMETER: Final = re.compile(r"\b((?:ssl)?password=)[^&\s]*", re.IGNORECASE)


def redact(url: str) -> str:
    """``url`` without its passwords (the authority's, a ``password`` or ``sslpassword`` parameter), for
    logs and status lines; the TLS parameters (sslmode, sslrootcert) stay, they say how it connects."""
    scheme, separator, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    if separator and "@" in authority:
        credentials, host = authority.rsplit("@", 1)
        url = f"{scheme}://{credentials.split(':', 1)[0]}@{host}{slash}{tail}"
    return _PASSWORD_PARAMETER.sub(r"\1***", url)
