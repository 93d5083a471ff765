"""Parsing a submitted document into chapters and parts, off the API's event loop, under its budgets.

``POST /v1/documents`` hands over what it received as bytes (a JSON body, or an upload's file, name and
form fields), capped at ``VOXLOG_MAX_DOCUMENT_BYTES`` before anything reads them, and gets a
:class:`ParsedDocument` back. Everything that parses runs in an offload process (:mod:`foundation.offload`:
``VOXLOG_OFFLOAD_CPU_S``, ``VOXLOG_OFFLOAD_MEMORY_MB``): the JSON, the text's decoding, the EPUB's unpacking
(at most 64 MiB), the markup's splitting, stopped as soon as the document is past its characters
(``VOXLOG_MAX_DOCUMENT_CHARS``; its text before splitting at twice that, markup included), parts (20,000) or
chapters (500): the bounds that are no settings are ``voxlog.composition.configs``' constants. Each refusal is
a 413 that says the limit, and names the setting when it is one (:data:`BUDGET_SETTINGS`,
``producers.requests.OFFLOAD_SETTINGS``), or a 422 (400 for a body that is not what the route takes) that says
what is wrong.

The processes serve every tenant, so each parse holds one of its tenant's slots (:mod:`producers.parse_slots`,
``VOXLOG_PARSE_PER_TENANT``), and its CPU budget is scaled by what was uploaded
(:attr:`DocumentBudget.cpu_s_base` plus ``cpu_s_per_mib`` for each MiB, at most ``VOXLOG_OFFLOAD_CPU_S``):
a 16 KiB EPUB that unpacked to 7 MiB of markup took 2.6 CPU-s, where a 2 MiB Markdown book takes 0.3.
"""

from __future__ import annotations

import hashlib
import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

from pydantic import Field, ValidationError

from contracts import Markup, Priority
from foundation.offload import OverBudget
from producers.document_split import Document, DocumentError, DocumentTooLarge, SplitLimits, split_epub, split_text
from producers.document_split import Markup as TextMarkup
from producers.errors import Rejected
from producers.parse_slots import TenantParseSlots
from producers.ports import OffLoop
from producers.requests import SpeechOptions, beyond_budget

BUDGET_SETTINGS: Final = {
    "bytes": "VOXLOG_MAX_DOCUMENT_BYTES",
    "chars": "VOXLOG_MAX_DOCUMENT_CHARS",
}
"""The budgets an operator sets; the others (parts, chapters, the EPUB's unpacked bytes) are fixed bounds."""
_GATE_S: Final = 60.0
"""How long a gate nobody opens holds the parsing: long past any test's release, short enough that a test whose
parsing holds the event loop itself (the bug the gate is for) fails instead of hanging."""
MARKUP_FACTOR: Final = 2
"""The text before splitting may have this many times ``VOXLOG_MAX_DOCUMENT_CHARS``, markup included."""


class DocumentOptions(SpeechOptions):
    """How to read the document: every part is a request with the :class:`SpeechOptions` fields."""

    format: str = Field("wav", description="Audio format of the stitched files: wav, mp3 or pcm.")
    priority: Priority = Field(
        "batch", description="batch (the default: interactive requests go first) or interactive."
    )
    title: str | None = Field(
        None, max_length=500, description="The title; else the document's own (heading, metadata)."
    )


class DocumentRequest(DocumentOptions):
    """POST /v1/documents JSON body (an EPUB is uploaded as multipart/form-data instead, field ``file``)."""

    text: str = Field(description="The document, at most VOXLOG_MAX_DOCUMENT_CHARS characters once read.")
    markup: str = Field("markdown", description="markdown (the default) or plain.")


@dataclass(frozen=True)
class DocumentBudget:
    """The document's limits, as the API's settings say (``voxlog.composition.configs.document_budget``)."""

    max_bytes: int
    max_chars: int
    part_chars: int
    max_parts: int
    max_chapters: int
    max_unpacked_bytes: int
    cpu_s_base: int = 0
    """CPU seconds every parse may take, whatever its size (0: the budget is not scaled, the offload's own)."""
    cpu_s_per_mib: float = 0.0
    """And CPU seconds for each MiB uploaded."""
    gate: str = ""
    """A test's hook, no setting (empty: none): a Unix socket the parsing connects to, and waits on until it is
    sent a byte, before it reads anything. Only a test's entry point sets it (tests/support/gated_api.py: the
    e2e test holds a split there and asks /healthz meanwhile)."""

    @property
    def limits(self) -> SplitLimits:
        return SplitLimits(chars=self.max_chars, parts=self.max_parts, chapters=self.max_chapters)

    def cpu_s(self, uploaded: int) -> int | None:
        """The CPU seconds parsing ``uploaded`` bytes may take (the offload caps it at its own); ``None``: the
        offload's own."""
        if not self.cpu_s_base:
            return None
        return math.ceil(self.cpu_s_base + self.cpu_s_per_mib * uploaded / 2**20)


@dataclass(frozen=True)
class Received:
    """A submission as it came: a JSON ``body``, or an uploaded file's bytes with its name and the form's fields."""

    body: bytes
    filename: str | None = None
    """The upload's file name; ``None``: ``body`` is the JSON body."""
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedDocument:
    document: Document
    markup: Markup
    options: DocumentOptions
    digest: str
    """What names the document with the idempotency key: its text (or file) and its options."""


_Body = TypeVar("_Body", bound=DocumentOptions)


class BadBody(DocumentError):
    """The body is not what the route takes: a 400 naming the field."""


def parse_document(received: Received, budget: DocumentBudget) -> ParsedDocument:
    """The document ``received`` holds, split (what the offload process runs)."""
    if budget.gate:
        _wait_at(budget.gate)
    if received.filename is None:
        request = _validated(DocumentRequest, received.body)
        if request.markup not in ("markdown", "plain"):
            raise DocumentError(
                f"markup {request.markup!r} is not known: use markdown or plain (upload an EPUB as 'file')"
            )
        markup: TextMarkup = "plain" if request.markup == "plain" else "markdown"
        return _split(request.text, markup, request, request.text.encode(), budget)
    options = _validated(DocumentOptions, dict(received.fields))
    name = received.filename.lower()
    if name.endswith(".epub"):
        document = split_epub(
            received.body,
            max_part_chars=budget.part_chars,
            title=options.title,
            limits=budget.limits,
            max_unpacked_bytes=budget.max_unpacked_bytes,
        )
        return ParsedDocument(document, "epub", options, _digest(received.body, options))
    try:
        text = received.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"the document is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    markup = "markdown" if name.endswith((".md", ".markdown")) else "plain"
    return _split(text, markup, options, received.body, budget)


def _split(
    text: str, markup: TextMarkup, options: DocumentOptions, raw: bytes, budget: DocumentBudget
) -> ParsedDocument:
    if len(text) > budget.max_chars * MARKUP_FACTOR:  # refused before any splitting
        raise DocumentTooLarge(
            f"the document has {len(text)} characters; the limit is {budget.max_chars}: split it", "chars"
        )
    document = split_text(text, markup, max_part_chars=budget.part_chars, title=options.title, limits=budget.limits)
    return ParsedDocument(document, markup, options, _digest(raw, options))


def _validated(model: type[_Body], data: bytes | dict[str, str]) -> _Body:
    try:
        return model.model_validate_json(data) if isinstance(data, bytes) else model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise BadBody(f"{where}: {first['msg']}") from None


def _digest(raw: bytes, options: DocumentOptions) -> str:
    return hashlib.sha256(raw + options.model_dump_json().encode()).hexdigest()


def _wait_at(gate: str) -> None:
    with socket.socket(socket.AF_UNIX) as held:
        held.settimeout(_GATE_S)
        held.connect(gate)
        held.recv(1)


class DocumentParser:
    """Parses documents in the offload, a tenant's at most so many at once, and says what a refusal means
    over HTTP."""

    def __init__(self, offload: OffLoop, budget: DocumentBudget, slots: TenantParseSlots | None = None) -> None:
        self._offload = offload
        self.budget = budget
        self.slots = slots if slots is not None else TenantParseSlots()

    async def parse(self, received: Received, tenant: str = "default") -> ParsedDocument:
        size = len(received.body)
        if size > self.budget.max_bytes:
            raise Rejected(
                f"the document has {size} bytes; the limit is {self.budget.max_bytes}"
                f" ({BUDGET_SETTINGS['bytes']}): split it",
                413,
            )
        cpu_s = self.budget.cpu_s(size)
        try:
            async with self.slots.slot(tenant):
                return await self._offload.run(parse_document, received, self.budget, cpu_s=cpu_s)
        except DocumentTooLarge as exc:
            setting = BUDGET_SETTINGS.get(exc.budget)
            raise Rejected(f"{exc} ({setting})" if setting else str(exc), 413) from exc
        except BadBody as exc:
            raise Rejected(str(exc), 400) from exc
        except DocumentError as exc:
            raise Rejected(str(exc), 422) from exc
        except OverBudget as exc:
            if exc.budget == "cpu" and cpu_s is not None:
                raise Rejected(
                    f"reading the document took more than {exc.limit}, the budget of an upload of {size} bytes"
                    f" ({self.budget.cpu_s_base:g} s, and {self.budget.cpu_s_per_mib:g} s for each MiB, at most"
                    " VOXLOG_OFFLOAD_CPU_S): a document whose markup is far larger than its upload is refused",
                    413,
                ) from exc
            raise beyond_budget(exc, "reading the document", "split it") from exc
