"""The key a command-line client sends: ``VOXLOG_API_KEY``, else the file ``voxlog dev up`` saved.

The file is ``$XDG_CONFIG_HOME/voxlog/api-key`` (``~/.config/voxlog/api-key``),
readable by its owner only. Kept apart from ``voxlog keys`` so that a client
(``voxlog demo``, ``voxlog speak``, ``voxlog check``) loads no Kafka or PostgreSQL driver.
"""

from __future__ import annotations

import os
from pathlib import Path

from producers.api_keys import KEY_PATTERN


def client_key_file() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "voxlog" / "api-key"


def client_key() -> str | None:
    """The key a CLI client sends: ``VOXLOG_API_KEY``, else the one ``voxlog dev up`` saved, else none."""
    if key := os.environ.get("VOXLOG_API_KEY"):
        return key.strip()
    path = client_key_file()
    return path.read_text().strip() if path.is_file() else None


def saved_key_id() -> str | None:
    path = client_key_file()
    match = KEY_PATTERN.fullmatch(path.read_text().strip()) if path.is_file() else None
    return match.group(1) if match else None


def save_client_key(token: str) -> Path:
    """Write the key where :func:`client_key` reads it, readable and writable by its owner only: created 0600,
    and set to 0600 when it was there already (``touch(mode=...)`` kept a file's earlier 0644)."""
    path = client_key_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        os.fchmod(file.fileno(), 0o600)  # before the key is written: an existing file keeps its mode through O_CREAT
        file.write(token + "\n")
    return path
