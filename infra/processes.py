"""Background processes tracked by pid files: start, probe and stop them."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from infra.errors import InfraError

_LOWEST_PICKED: Final = 10_000
_EPHEMERAL_RANGE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (32768 unless configured otherwise)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class PortLeases:
    """Ports handed out lately, across processes: one file per port, created exclusively.

    A port is free when nothing listens on it, but it stays free until the service it was picked for binds
    it, seconds later, and meanwhile any other caller, in this process or another (the CI runs several test
    sessions side by side), could pick it again: two services of one deployment were handed the same
    metrics port and the second exited with "Address already in use". A lease keeps a picked port from
    being picked again until it expires (by then its service has bound it, or has long stopped).
    """

    def __init__(self, directory: Path, lease_s: float) -> None:
        self.directory = directory
        self.lease_s = lease_s

    def take(self, port: int) -> bool:
        """Lease ``port``: ``False`` when another caller holds an unexpired lease on it."""
        path = self.directory / str(port)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self._create(path):
                return True
            if time.time() - path.stat().st_mtime < self.lease_s:
                return False
            path.unlink(missing_ok=True)  # expired: taken over (one of two takers at once wins the create)
            return self._create(path)
        except FileNotFoundError:  # its holder's lease expired and was taken over between our calls
            return False
        except OSError:  # no writable temporary directory: no leases, as before they existed
            return True

    @staticmethod
    def _create(path: Path) -> bool:
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        return True


LEASES: Final = PortLeases(Path(tempfile.gettempdir()) / "voxlog-port-leases", lease_s=600.0)


def free_port(leases: PortLeases = LEASES) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no caller was handed lately, below the ephemeral range.

    A port the kernel picks (bind to 0) comes from the range it also hands to outgoing connections, and
    between this call and the service's own bind any client connecting anywhere (a Kafka or PostgreSQL
    client, say) could take it: a worker then failed to serve its metrics with "Address already in use".
    Below the range only another explicit bind can take it, and the lease keeps other callers from
    picking it for that bind.
    """
    low = _ephemeral_low()
    pick = random.SystemRandom()
    for _ in range(200 if low > _LOWEST_PICKED + 1000 else 0):
        port = pick.randrange(_LOWEST_PICKED, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if leases.take(port):
            return port
    with socket.socket() as sock:  # no room below the range: let the kernel pick
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file`` if that process is still running."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) else None


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # The state letter follows the parenthesised command name.
    return stat.rsplit(")", 1)[-1].split()[0] not in {"Z", "X"}


def start_background(
    argv: Sequence[str],
    *,
    log_file: Path,
    pid_file: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` detached in its own session, output appended to ``log_file``."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )
        except OSError as exc:
            raise InfraError(f"cannot start {argv[0]}: {exc}") from exc
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def stop_pid(pid: int, *, timeout: float, name: str) -> bool:
    """SIGTERM ``pid``, wait up to ``timeout`` seconds, then SIGKILL it.

    Returns ``True`` when it stopped on SIGTERM, ``False`` when it had to be
    killed.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, timeout):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, 10.0):
        raise InfraError(f"{name} (pid {pid}) survived SIGKILL")
    return False


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has exited (reaping it when it is our child)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not pid_alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log yet)"
