"""The development stack's client key (voxlog.client_key, voxlog.devstack.dev_key): written for its owner only,
and never printed."""

from __future__ import annotations

import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from foundation.settings import DevSettings
from producers.api_keys import new_key
from voxlog import devstack, keys_cli
from voxlog.client_key import client_key, client_key_file, save_client_key

pytestmark = pytest.mark.unit


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("VOXLOG_API_KEY", raising=False)
    return tmp_path / "config"


def test_regression_a_pre_existing_0644_key_file_kept_its_mode_and_now_ends_0600(config_home: Path):
    """Issue 40, item 8: ``touch(mode=0o600)`` sets the mode of a file it creates only; a key file that was
    there, readable by everyone, stayed so with the new key in it."""
    path = client_key_file()
    path.parent.mkdir(parents=True)
    path.write_text("vxl_000000000000_" + "A" * 43 + "\n")
    path.chmod(0o644)
    token = new_key().token
    assert save_client_key(token) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert client_key() == token


def test_a_new_key_file_is_0600_in_a_directory_of_its_owners(config_home: Path):
    path = save_client_key(new_key().token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0


async def test_dev_up_prints_the_key_files_path_and_id_never_the_key(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
):
    """Issue 40, item 8: `voxlog dev up` printed the whole key, into terminals' and CI's logs."""
    made = new_key()

    async def no_keys(settings: Any, tenant: Any = None) -> list[dict[str, Any]]:
        return []

    async def issue(settings: Any, tenant: str, scopes: tuple[str, ...], name: str = "") -> Any:
        return made

    async def projected(settings: Any, key_id: str, within_s: float) -> bool:
        return True

    monkeypatch.setattr(keys_cli, "keys", no_keys)
    monkeypatch.setattr(keys_cli, "issue", issue)
    monkeypatch.setattr(keys_cli, "wait_projected", projected)
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:9092", database_url="postgresql://voxlog@127.0.0.1/voxlog")
    line = await devstack.dev_key(DevSettings(), stack)  # type: ignore[arg-type]
    assert made.secret not in line
    assert made.key_id in line
    assert str(client_key_file()) in line
    assert client_key() == made.token
