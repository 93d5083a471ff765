"""The test's side of the document gate (``DocumentBudget.gate``, ``VOXLOG_DOCUMENT_GATE`` for
:mod:`tests.support.gated_api`): a Unix socket that each document's parsing connects to and waits on until it
is sent a byte (``producers.document_parsing``). A unit test sets it on the budget, an end-to-end test on the
gated API's environment; both hold the parsing there and release it with :meth:`Gate.release`."""

from __future__ import annotations

import asyncio
from pathlib import Path


class Gate:
    """Where the parsing waits: ``held`` is set once it arrived; ``release`` sends it on."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.held = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> Gate:
        self._server = await asyncio.start_unix_server(self._arrive, self.path)
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def __aenter__(self) -> Gate:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        self.close()

    async def _arrive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.held.set()

    async def release(self) -> None:
        assert self._writer is not None
        self._writer.write(b"go")
        await self._writer.drain()
        self._writer.close()
