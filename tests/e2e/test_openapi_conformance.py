"""Every route answers as the live OpenAPI document says: statuses, content types, bodies and headers.

Schemathesis reads the schema the running API serves (/schema/openapi.json)
and calls every operation in it, with generated inputs (mostly unknown ids and
invalid bodies) and with the ids of a real job and a real document, completed
on a real pipeline (projector, a bench-sleep worker, the API), so that the 200
answers are checked too. A route added later is in the schema, so it is
called without this test naming it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.api_fuzz import CHECKS, known_ids, never_switched_on
from tests.support.apps import start_pipeline

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_MAX_BATCH": "20"}
WEBHOOKS = {"VOXLOG_WEBHOOK_SIGNING_KEY": "s" * 32, "VOXLOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
EXAMPLES_PER_OPERATION = 15


def _run(schema: Any, known: dict[str, Any]) -> tuple[Counter[str], list[str]]:
    """Call every operation (generated cases, then the known ids); the statuses seen and the failures."""
    statuses: Counter[str] = Counter()
    failures: list[str] = []

    def call(case: Any) -> None:
        never_switched_on(case)
        try:
            response = case.call_and_validate(checks=CHECKS)
            statuses[f"{case.operation.label} {response.status_code}"] += 1
        except Exception as exc:  # a check failed: collected, the test reports them all
            failures.append(f"{case.operation.label}: {exc}"[:2000])

    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
        def generated(case: Any) -> None:
            call(case)

        generated()
        names = {p.name for p in operation.path_parameters}
        if names:
            call(operation.Case(path_parameters={name: known[name] for name in names}))
    return statuses, failures


@pytest.mark.slow
async def test_every_route_answers_as_the_live_openapi_document_says(apps):
    app, voices = await start_pipeline(apps, workers=1, **BENCH, **WEBHOOKS)
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        known = await known_ids(client, voices[0])
    schema = schemathesis.openapi.from_url(f"{app.api}/schema/openapi.json")
    statuses, failures = await asyncio.to_thread(_run, schema, known)
    assert not failures, "\n\n".join(failures[:20])
    operations = {result.ok().label for result in schema.get_all_operations()}
    called = {label.rsplit(" ", 1)[0] for label in statuses}
    assert called == operations, f"not called: {operations - called}"
    for label in ("GET /v1/jobs/{job_id}", "GET /v1/jobs/{job_id}/audio", "GET /v1/documents/{document_id}/toc"):
        assert statuses[f"{label} 200"] >= 1, f"{label} never answered 200: {statuses}"
