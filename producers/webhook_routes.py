"""A tenant's webhook endpoints over HTTP: ``POST``/``GET /v1/webhooks``, ``GET``/``DELETE
/v1/webhooks/{id}``, ``POST /v1/webhooks/{id}/rotate-secret`` (what ``voxlog webhooks`` does, through the same
:class:`producers.webhooks.WebhookRegistry`), and an endpoint's deliveries: ``GET
/v1/webhooks/{id}/deliveries`` (newest first, a page at a time) and ``POST
/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver``.

Registering, removing and redelivering need the ``submit`` scope (they decide where the tenant's outcomes go),
listing the ``read`` scope; a tenant sees only its own endpoints and their deliveries (another's is a 404, as an
unknown one). The secret is in the answer to a registration or a rotation, and never again.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Any

from litestar import Response, delete, get, post
from litestar.params import Body, FromPath, QueryParameter
from pydantic import ConfigDict, Field

from contracts import DeliveryState, WebhookEventType
from producers.api_keys import Principal
from producers.auth import READ, SUBMIT
from producers.deps import Injected
from producers.errors import Rejected
from producers.http_errors import responses
from producers.job_routes import IdempotencyKey
from producers.views import View
from producers.webhooks import MAX_PAGE, Shown, WebhookRegistry
from projections.reads.webhooks import Delivery, Endpoint

LISTED = "recorded on the log: listed once the projector applies it (within a moment)"


class WebhookEndpointBody(View):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(
        max_length=2000,
        description="Where deliveries are POSTed: https, to a public address (the operator may allow networks).",
    )
    event_types: list[WebhookEventType] = Field(min_length=1, description="The outcomes this endpoint is told of.")
    description: str = Field("", max_length=200)


class WebhookEndpointView(View):
    endpoint_id: uuid.UUID
    url: str
    event_types: list[WebhookEventType]
    description: str
    secret_generation: int = Field(description="1 when registered, one more at each rotation.")
    previous_secret_until: datetime | None = Field(
        description="After a rotation: until when the previous secret signs deliveries too."
    )
    created_at: datetime
    updated_at: datetime
    disabled_reason: str = Field(
        "",
        description="Set when the delivery process disabled it (no delivery succeeded for a day) and why: nothing"
        " is delivered to it until POST .../enable.",
    )


class WebhookEndpointsView(View):
    endpoints: list[WebhookEndpointView]


class WebhookSecretView(View):
    endpoint: WebhookEndpointView
    secret: str = Field(
        description="The signing secret (whsec_...; Standard Webhooks): shown in this answer only. Verify each"
        " delivery with it (voxlog.client.verify_webhook, or the standardwebhooks library)."
    )
    detail: str


class WebhookRemoved(View):
    endpoint_id: uuid.UUID
    detail: str


class WebhookDeliveryView(View):
    delivery_id: uuid.UUID = Field(description="Its webhook-id: the same on every attempt and redelivery.")
    event_type: WebhookEventType
    job_id: uuid.UUID | None
    document_id: uuid.UUID | None
    state: DeliveryState = Field(description="pending (to be tried), delivered (a 2xx), given_up (retries spent).")
    attempts: int = Field(description="Attempts made (a redelivery keeps the count).")
    next_attempt_at: datetime | None = Field(description="When a pending delivery is tried next.")
    last_status: int | None = Field(description="The HTTP status of the last attempt, if it had an answer.")
    last_error: str = Field(description="Why the last attempt failed (empty when it did not).")
    last_duration_ms: int | None
    body: dict[str, Any] = Field(description="What is sent: the same JSON on every attempt.")
    created_at: datetime
    updated_at: datetime = Field(description="When its latest record was made (after an attempt, or a redelivery).")


class WebhookDeliveriesView(View):
    deliveries: list[WebhookDeliveryView] = Field(description="Newest first.")
    next_before: uuid.UUID | None = Field(
        description="Pass as ?before= for the next (older) page; null when this page is the last."
    )


class WebhookRedeliveryView(View):
    delivery: WebhookDeliveryView
    detail: str


def delivery_view(delivery: Delivery) -> WebhookDeliveryView:
    record = delivery.record
    body = json.loads(record.body)
    return WebhookDeliveryView(
        **record.model_dump(include=set(WebhookDeliveryView.model_fields) - {"body", "updated_at"}),
        body=body if isinstance(body, dict) else {"body": body}, updated_at=delivery.updated_at,
    )  # fmt: skip


def endpoint_view(endpoint: Endpoint) -> WebhookEndpointView:
    return WebhookEndpointView(
        endpoint_id=endpoint.endpoint_id, url=endpoint.url, event_types=list(endpoint.event_types),
        description=endpoint.description, secret_generation=endpoint.secret_generation,
        previous_secret_until=endpoint.previous_secret_until, created_at=endpoint.created_at,
        updated_at=endpoint.updated_at, disabled_reason=endpoint.disabled_reason,
    )  # fmt: skip


def _shown(shown: Shown) -> WebhookSecretView:
    return WebhookSecretView(endpoint=endpoint_view(shown.endpoint), secret=shown.secret, detail=LISTED)


def _registry(webhooks: WebhookRegistry | None) -> WebhookRegistry:
    if webhooks is None:
        raise Rejected("this API was started without webhooks", 404)
    return webhooks


def _unknown(endpoint_id: uuid.UUID) -> Rejected:
    return Rejected(f"no webhook endpoint {endpoint_id} (GET /v1/webhooks lists yours)", 404)


@post(
    "/v1/webhooks",
    summary="Register a webhook endpoint (a WebhookEndpointSet event); its signing secret is shown once",
    guards=SUBMIT,
    status_code=201,
    responses=responses(400, 401, 403, 404, 409, 422, 503),
)
async def add_endpoint(
    webhooks: Injected[WebhookRegistry | None],
    principal: Injected[Principal],
    data: Annotated[WebhookEndpointBody, Body()],
    idempotency_key: IdempotencyKey = None,
) -> Response[WebhookSecretView]:
    shown = await _registry(webhooks).add(
        principal.tenant, data.url, data.event_types, data.description.strip(), idempotency_key
    )
    return Response(_shown(shown), status_code=201)


@get("/v1/webhooks", summary="Your webhook endpoints", guards=READ, responses=responses(401, 403, 503))
async def list_endpoints(
    webhooks: Injected[WebhookRegistry | None], principal: Injected[Principal]
) -> WebhookEndpointsView:
    endpoints = await _registry(webhooks).list(principal.tenant)
    return WebhookEndpointsView(endpoints=[endpoint_view(e) for e in endpoints])


@get(
    "/v1/webhooks/{endpoint_id:uuid}",
    summary="One of your webhook endpoints",
    guards=READ,
    responses=responses(401, 403, 404, 503),
)
async def get_endpoint(
    webhooks: Injected[WebhookRegistry | None], principal: Injected[Principal], endpoint_id: FromPath[uuid.UUID]
) -> WebhookEndpointView:
    endpoint = await _registry(webhooks).get(principal.tenant, endpoint_id)
    if endpoint is None:
        raise _unknown(endpoint_id)
    return endpoint_view(endpoint)


@post(
    "/v1/webhooks/{endpoint_id:uuid}/rotate-secret",
    summary="A new signing secret, shown once; the previous one signs too for a day",
    guards=SUBMIT,
    status_code=200,
    responses=responses(401, 403, 404, 503),
)
async def rotate_secret(
    webhooks: Injected[WebhookRegistry | None], principal: Injected[Principal], endpoint_id: FromPath[uuid.UUID]
) -> WebhookSecretView:
    shown = await _registry(webhooks).rotate(principal.tenant, endpoint_id)
    if shown is None:
        raise _unknown(endpoint_id)
    return _shown(shown)


@delete(
    "/v1/webhooks/{endpoint_id:uuid}",
    summary="Remove a webhook endpoint (a WebhookEndpointRemoved event): nothing is delivered to it again",
    guards=SUBMIT,
    status_code=202,
    responses=responses(401, 403, 404, 503),
)
async def remove_endpoint(
    webhooks: Injected[WebhookRegistry | None], principal: Injected[Principal], endpoint_id: FromPath[uuid.UUID]
) -> Response[WebhookRemoved]:
    reason = f"removed over HTTP by key {principal.key_id}" if principal.key_id else "removed over HTTP (auth off)"
    if not await _registry(webhooks).remove(principal.tenant, endpoint_id, reason):
        raise _unknown(endpoint_id)
    return Response(WebhookRemoved(endpoint_id=endpoint_id, detail=LISTED), status_code=202)


@get(
    "/v1/webhooks/{endpoint_id:uuid}/deliveries",
    summary="Your endpoint's deliveries, newest first, a page at a time",
    guards=READ,
    responses=responses(400, 401, 403, 404, 503),
)
async def list_deliveries(
    webhooks: Injected[WebhookRegistry | None],
    principal: Injected[Principal],
    endpoint_id: FromPath[uuid.UUID],
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE, description="Deliveries in this page")] = 20,
    before: Annotated[
        uuid.UUID | None,
        QueryParameter(description="The previous page's next_before: list the deliveries made before it"),
    ] = None,
) -> WebhookDeliveriesView:
    """Each delivery as its latest record says (the projection's ``webhook_deliveries``, within a moment of the
    log): its state, attempts, next attempt, the last attempt's status, error and duration, and its body."""
    page = await _registry(webhooks).deliveries(principal.tenant, endpoint_id, limit, before)
    if page is None:
        raise _unknown(endpoint_id)
    last = page.deliveries[-1].record.delivery_id if page.more else None
    return WebhookDeliveriesView(deliveries=[delivery_view(d) for d in page.deliveries], next_before=last)


@post(
    "/v1/webhooks/{endpoint_id:uuid}/deliveries/{delivery_id:uuid}/redeliver",
    summary="Deliver again (a WebhookDeliveryRecorded, pending and due now; the same webhook-id and body)",
    guards=SUBMIT,
    status_code=202,
    responses=responses(401, 403, 404, 409, 503),
)
async def redeliver(
    webhooks: Injected[WebhookRegistry | None],
    principal: Injected[Principal],
    endpoint_id: FromPath[uuid.UUID],
    delivery_id: FromPath[uuid.UUID],
) -> Response[WebhookRedeliveryView]:
    """A delivered or given-up delivery is recorded again, pending, its next attempt now and its attempts kept;
    the delivery process sends it again with the same ``webhook-id`` (receivers de-duplicate on it) and body.
    409 while it is pending already."""
    delivery = await _registry(webhooks).redeliver(principal.tenant, endpoint_id, delivery_id)
    if delivery is None:
        raise Rejected(
            f"no delivery {delivery_id} of webhook endpoint {endpoint_id}"
            f" (GET /v1/webhooks/{endpoint_id}/deliveries lists them)",
            404,
        )
    view = WebhookRedeliveryView(delivery=delivery_view(delivery), detail=LISTED)
    return Response(view, status_code=202)


@post(
    "/v1/webhooks/{endpoint_id:uuid}/enable",
    summary="Enable an endpoint the delivery process disabled (a WebhookEndpointSet event)",
    guards=SUBMIT,
    status_code=200,
    responses=responses(401, 403, 404, 503),
)
async def enable_endpoint(
    webhooks: Injected[WebhookRegistry | None], principal: Injected[Principal], endpoint_id: FromPath[uuid.UUID]
) -> WebhookEndpointView:
    """The endpoint, enabled: its outcomes from now on are delivered (an endpoint that was not disabled is
    answered as it is)."""
    endpoint = await _registry(webhooks).enable(principal.tenant, endpoint_id)
    if endpoint is None:
        raise _unknown(endpoint_id)
    return endpoint_view(endpoint)


ROUTES = [
    add_endpoint, list_endpoints, get_endpoint, rotate_secret, enable_endpoint, remove_endpoint, list_deliveries,
    redeliver,
]  # fmt: skip
