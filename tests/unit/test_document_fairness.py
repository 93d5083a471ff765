"""Reading documents shared between tenants (producers.parse_slots, producers.document_parsing): a tenant's
uploads hold at most VOXLOG_PARSE_PER_TENANT of the offload's processes, and a parse's CPU budget is scaled by
what was uploaded. Parses are held at a socket the test releases (DocumentBudget.gate), never for a while."""

from __future__ import annotations

import asyncio
import io
import zipfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from producers.api_keys import NewKey, StoredKey, new_key
from producers.auth import KeyBook
from producers.document_parsing import DocumentBudget
from producers.parse_slots import TenantParseSlots
from tests.support import api_fakes
from tests.support.api_fakes import DOCUMENTS, Log, Reader, deps
from tests.support.epub import CONTAINER
from tests.unit.test_offload import Gate

pytestmark = pytest.mark.unit

DOCUMENT = {"text": "A short book.", "voice": "af_heart"}


class Keys:
    """The projection's api_keys, as the key book reads them."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredKey] = {}

    def issue(self, tenant: str) -> dict[str, str]:
        key: NewKey = new_key()
        self.rows[key.key_id] = StoredKey(key.key_id, tenant, frozenset({"submit"}), key.secret_sha256, None, None)
        return {"Authorization": f"Bearer {key.token}"}

    async def api_key(self, key_id: str) -> StoredKey | None:
        return self.rows.get(key_id)


class ObservedSlots(TenantParseSlots):
    """The tenants' slots, with an event set as each upload asks for one (it waits for it, or holds it, by the
    time the test's next step runs: asking registers the request before it yields to the loop)."""

    def __init__(self, per_tenant: int = 1, wait_s: float = 60.0) -> None:
        super().__init__(per_tenant, wait_s)
        self.asked: list[asyncio.Event] = [asyncio.Event() for _ in range(8)]
        self._count = 0

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        self.asked[self._count].set()
        self._count += 1
        async with super().slot(tenant):
            yield


@asynccontextmanager
async def api(gate: Gate, slots: TenantParseSlots, keys: Keys) -> AsyncIterator[httpx.AsyncClient]:
    api_deps = deps(Reader(), Log(), keys=KeyBook(keys, cache_s=0), document_budget=replace(DOCUMENTS, gate=gate.path))
    api_deps.document_parser.slots = slots
    async with api_fakes.client(api_deps) as client:
        yield client


async def test_regression_two_uploads_of_one_tenant_held_both_parsing_processes_and_every_tenant_waited(
    tmp_path: Path,
):
    """Two processes read every tenant's documents: one tenant's two expensive uploads held both, and every other
    tenant's documents waited behind them. Now its second upload waits for its first, and another tenant's is
    read meanwhile, in the process left free (it reaches the gate while the first tenant's is held there)."""
    keys, slots = Keys(), ObservedSlots()
    acme, globex = keys.issue("acme"), keys.issue("globex")
    async with Gate(tmp_path / "gate") as gate, api(gate, slots, keys) as client:
        first = asyncio.create_task(client.post("/v1/documents", json=DOCUMENT, headers=acme))
        await gate.until(1)  # acme's first document is being read, held
        second = asyncio.create_task(client.post("/v1/documents", json=DOCUMENT, headers=acme))
        await slots.asked[1].wait()
        assert (slots.held("acme"), slots.waiting("acme")) == (1, 1)
        other = asyncio.create_task(client.post("/v1/documents", json=DOCUMENT, headers=globex))
        await gate.until(2)  # globex's is read while acme's first is still held
        assert slots.held("globex") == 1
        await gate.release(1)
        assert (await other).status_code == 202
        assert not second.done()
        await gate.release(0)
        assert (await first).status_code == 202
        await gate.until(3)  # acme's second is read once its first ended
        await gate.release(2)
        assert (await second).status_code == 202
    assert (slots.held("acme"), slots.waiting("acme")) == (0, 0)


async def test_an_upload_past_its_tenants_parses_waits_a_bounded_time_then_429_naming_the_setting(tmp_path: Path):
    keys, slots = Keys(), ObservedSlots(wait_s=0.01)
    acme = keys.issue("acme")
    async with Gate(tmp_path / "gate") as gate, api(gate, slots, keys) as client:
        first = asyncio.create_task(client.post("/v1/documents", json=DOCUMENT, headers=acme))
        await gate.until(1)
        refused = await client.post("/v1/documents", json=DOCUMENT, headers=acme)
        await gate.release(0)
        assert (await first).status_code == 202
    assert refused.status_code == 429, refused.text
    assert "VOXLOG_PARSE_PER_TENANT" in refused.json()["detail"]
    assert refused.headers["Retry-After"] == "1"
    assert slots.held("acme") == 0


def exploding_epub(spans: int) -> bytes:
    """A deflated EPUB of a few KiB whose one chapter is megabytes of empty elements around one word."""
    chapter = "<html><body><p>Words." + "<span></span>" * spans + "</p></body></html>"
    package = (
        '<package xmlns="http://www.idpf.org/2007/opf"><manifest><item id="a" href="a.xhtml"'
        ' media-type="application/xhtml+xml"/></manifest><spine><itemref idref="a"/></spine></package>'
    )
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", compression=zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", CONTAINER)
        book.writestr("content.opf", package)
        book.writestr("a.xhtml", chapter)
    return data.getvalue()


async def test_regression_a_16_kib_epub_that_unpacked_to_7_mib_of_markup_took_the_whole_cpu_budget():
    """Every parse had VOXLOG_OFFLOAD_CPU_S (30 s): a 16 KiB EPUB of 7 MiB of markup took 2.6 CPU-s, two of them
    held both processes. Its budget is scaled by its upload now (1 s, and 5 s a MiB: 2 s for this one, which
    needs more than twice that), and it is refused with a 413 that names the budget."""
    book = exploding_epub(1_200_000)
    assert len(book) < 40 * 2**10
    budget = replace(DOCUMENTS, max_unpacked_bytes=64 * 2**20, cpu_s_base=1, cpu_s_per_mib=5.0)
    async with api_fakes.client(deps(Reader(), Log(), document_budget=budget)) as client:
        answer = await client.post("/v1/documents", files={"file": ("small.epub", book)}, data={"voice": "af_heart"})
    assert answer.status_code == 413, answer.text
    detail = answer.json()["detail"]
    assert "more than 2 CPU seconds" in detail
    assert "(1 s, and 5 s for each MiB, at most VOXLOG_OFFLOAD_CPU_S)" in detail


def test_a_parses_cpu_budget_grows_with_its_upload_and_is_unscaled_when_not_set():
    scaled = DocumentBudget(1, 1, 100, 1, 1, 1, cpu_s_base=1, cpu_s_per_mib=5.0)
    assert [scaled.cpu_s(size) for size in (0, 16 * 2**10, 2**20, 2 * 2**20)] == [1, 2, 6, 11]
    assert DOCUMENTS.cpu_s(2**20) is None  # the offload's own budget (which also caps a scaled one)
