"""A new API key's id is one no key issued or revoked has (voxlog.keys_cli.fresh_key)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import ApiKeyIssued
from foundation.settings import ModeSettings
from producers.api_keys import NewKey, new_key
from voxlog import keys_cli
from voxlog.errors import VoxlogError

pytestmark = pytest.mark.unit


class Drawn:
    """Key ids drawn in order: the first ones those of keys there already."""

    def __init__(self, *key_ids: str) -> None:
        self.key_ids = list(key_ids)

    def __call__(self) -> NewKey:
        return NewKey(self.key_ids.pop(0), new_key().secret) if self.key_ids else new_key()


class Published:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Published:
        return self

    async def __aenter__(self) -> Published:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def publish(self, event: Any) -> None:
        self.events.append(event)


async def test_regression_a_new_keys_id_that_an_issued_or_revoked_key_has_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
):
    """Issue 40, item 8: key ids were not checked for collisions. The projection keeps the first ApiKeyIssued
    of an id, so a key whose id was taken would never authenticate, and a revoked id would be issued again."""
    there = {"aaaaaaaaaaaa": "live", "bbbbbbbbbbbb": "revoked"}
    asked: list[str] = []

    async def taken(settings: ModeSettings, key_id: str) -> bool:
        asked.append(key_id)
        return key_id in there

    published = Published()
    monkeypatch.setattr(keys_cli, "key_id_taken", taken)
    monkeypatch.setattr(keys_cli, "new_key", Drawn("aaaaaaaaaaaa", "bbbbbbbbbbbb"))
    monkeypatch.setattr(keys_cli, "KafkaEventPublisher", published)
    key = await keys_cli.issue(ModeSettings(), "acme", ("read",))
    assert key.key_id not in there
    assert asked == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", key.key_id]
    (issued,) = published.events
    assert isinstance(issued, ApiKeyIssued)
    assert issued.payload.key_id == key.key_id


async def test_ids_that_are_always_taken_issue_nothing_and_say_why():
    async def always(key_id: str) -> bool:
        return True

    with pytest.raises(VoxlogError, match="8 new key ids in a row were taken already"):
        await keys_cli.fresh_key(always, Drawn(*["cccccccccccc"] * 8))
