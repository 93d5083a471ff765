"""The one way untrusted XML is parsed: expat with no DTD, entity or external reference ever resolved.

An EPUB's container, package and NCX files (:mod:`producers.epub`) and a request's SSML
(:mod:`contracts.ssml`) are both written by whoever sends them. The rule: an internal DTD subset (where
entities are declared: "billion laughs", XXE), any entity declaration, and any reference to an entity the
document does not define are refused, in any encoding; a DOCTYPE naming an external DTD (as NCX files do)
is allowed and never read: expat reads no file or URL itself, and parameter entities (the external subset)
are never parsed. XML's five predefined entities and character references are what they always are.
Expat itself is linear in its input (no backtracking, no recursion on nesting).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NoReturn
from xml.parsers import expat

DECLARES_ENTITIES: Final = "declares XML entities or a DTD of its own, which are refused: none is ever resolved"


def undefined_entity(entity: str) -> str:
    return f"refers to the entity &{entity}; which is never resolved"


def safe_parser(refuse: Callable[[str], NoReturn], namespace_separator: str | None = None) -> expat.XMLParserType:
    """A new expat parser that calls ``refuse`` with what the document does (:data:`DECLARES_ENTITIES`, or
    :func:`undefined_entity`) the moment it declares or refers to anything that would be resolved; ``refuse``
    raises. The caller sets the element and text handlers."""

    def declared(*_: object) -> None:
        refuse(DECLARES_ENTITIES)

    def undefined(entity: str, *_: object) -> None:
        refuse(undefined_entity(entity))

    def doctype(_name: str, _system: str | None, _public: str | None, internal_subset: int) -> None:
        if internal_subset:
            refuse(DECLARES_ENTITIES)

    def external(*_: object) -> int:
        refuse(DECLARES_ENTITIES)

    parser = expat.ParserCreate(namespace_separator=namespace_separator)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = declared
    parser.UnparsedEntityDeclHandler = declared
    parser.ExternalEntityRefHandler = external
    parser.SkippedEntityHandler = undefined
    return parser
