"""Every body the fuzz campaign POSTs to /v1/documents, read as the offload reads it: a document, or a
DocumentError (the API's 400, 413 or 422) that says what is wrong; never another exception, which the API
answers 500. The campaign (tests/e2e/test_fuzz_campaign.py) sends the same bodies to a live API; here they are
many more, in seconds, under limits small enough that each of them is reached."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from producers.document_parsing import ParsedDocument, parse_document
from producers.document_split import DocumentError
from tests.support.api_fakes import DOCUMENTS
from tests.support.document_bodies import DocumentBody, document_bodies

pytestmark = pytest.mark.unit


def _read(body: DocumentBody) -> ParsedDocument | str:
    """The document, or what the refusal said."""
    try:
        return parse_document(body.received(), DOCUMENTS)
    except DocumentError as refused:
        return str(refused)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=document_bodies("af_heart"))
def test_every_fuzzed_body_is_read_or_refused_with_a_message(body: DocumentBody):
    read = _read(body)
    if isinstance(read, str):
        assert read.strip()
    else:
        assert read.document.part_count > 0
        assert read.document.chars <= DOCUMENTS.max_chars
