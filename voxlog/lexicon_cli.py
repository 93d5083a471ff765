"""`voxlog lexicon add|remove|list`: the server's lexicon, the words every request says as given phonemes.

An entry is a ``LexiconEntrySet`` event (a removal ``LexiconEntryRemoved``) on the control topic, keyed by its
word, not a row written by hand: every API instance follows the projection of it (within a second:
``voxlog.composition.api.LEXICON_CACHE_S``), replay rebuilds it, and ``voxlog audit`` shows the pronunciations
each job was said with. The same actions as ``PUT``/``DELETE /v1/lexicon/{word}`` (:mod:`voxlog.operations`).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
from typing import Any

from contracts import Producer
from contracts.pronunciations import PronunciationError, checked_phonemes, checked_word
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import ReconnectingPublisher
from foundation.settings import ModeSettings
from voxlog.instance import instance_name
from voxlog.operations import lexicon_entries, remove_pronunciation, set_pronunciation


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lexicon = commands.add_parser("lexicon", help="the server's pronunciations, recorded on the log")
    lexicon_commands = lexicon.add_subparsers(dest="lexicon_command", required=True)
    add = lexicon_commands.add_parser("add", help="say WORD as PHONEMES in every request that says it")
    add.add_argument("word")
    add.add_argument("phonemes", help="Kokoro's phoneme alphabet, as SSML's <phoneme ph> takes it")
    add.add_argument("--reason", default="", help="recorded with the entry (default: who ran it)")
    remove = lexicon_commands.add_parser("remove", help="say WORD by G2P again")
    remove.add_argument("word")
    remove.add_argument("--reason", default="", help="recorded with the removal (default: who ran it)")
    listing = lexicon_commands.add_parser("list", help="the lexicon as projected")
    listing.add_argument("--json", action="store_true", help="one JSON document")


def run(args: argparse.Namespace) -> int:
    settings = ModeSettings()
    try:
        if args.lexicon_command == "list":
            entries = asyncio.run(_list(settings))
            print(json.dumps(entries, indent=2, default=str) if args.json else "\n".join(_lines(entries)))
            return 0
        word = checked_word(args.word)
        reason = args.reason or f"{'set' if args.lexicon_command == 'add' else 'removed'} by {getpass.getuser()}"
        if args.lexicon_command == "add":
            phonemes = checked_phonemes(args.word, args.phonemes)
            asyncio.run(_set(settings, word, phonemes, reason))
            print(f"{word} -> /{phonemes}/ ({reason}); every API follows once the projector applies it")
            return 0
        removed = asyncio.run(_remove(settings, word, reason))
    except PronunciationError as exc:
        print(f"voxlog lexicon: {exc}")
        return 2
    except BrokerUnavailable as exc:
        print(f"voxlog lexicon: Kafka did not take the change ({exc}); nothing changed, run it again")
        return 2
    except DATABASE_OUTAGES as exc:
        print(f"voxlog lexicon: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2
    if not removed:
        print(f"voxlog lexicon: no entry for {word!r}; nothing changed")
        return 1
    print(f"{word} removed ({reason}); every API follows once the projector applies it")
    return 0


def _publisher(settings: ModeSettings) -> ReconnectingPublisher:
    return ReconnectingPublisher(
        settings.kafka_access(), settings.control_topic, client_id="voxlog-lexicon", deadline_ms=30_000
    )


async def _set(settings: ModeSettings, word: str, phonemes: str, reason: str) -> None:
    nodes = _publisher(settings)
    try:
        await set_pronunciation(nodes, word, phonemes, reason, _producer())
    finally:
        await nodes.stop()


def _producer() -> Producer:
    return Producer(service="lexicon", instance=instance_name())


async def _remove(settings: ModeSettings, word: str, reason: str) -> bool:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    nodes = _publisher(settings)
    try:
        return await remove_pronunciation(pool, nodes, word, reason, _producer())
    finally:
        await nodes.stop()
        await pool.close()


async def _list(settings: ModeSettings) -> list[dict[str, Any]]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await lexicon_entries(pool)
    finally:
        await pool.close()


def _lines(entries: list[dict[str, Any]]) -> list[str]:
    if not entries:
        return ["the lexicon is empty (voxlog lexicon add WORD PHONEMES)"]
    width = max(len(e["word"]) for e in entries)
    return [f"{e['word']:<{width}}  /{e['phonemes']}/  {e['set_at']:%Y-%m-%d %H:%M:%S}  {e['reason']}" for e in entries]
