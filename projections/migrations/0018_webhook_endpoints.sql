-- Tenants' webhook endpoints, from WebhookEndpointSet and WebhookEndpointRemoved on the nodes topic: each
-- endpoint's latest word. A removed endpoint keeps its row (removed_at set), so that an older record of it
-- never brings it back. No secret is stored: it is derived from the server's signing key and the generation.
CREATE TABLE webhook_endpoints (
    endpoint_id           uuid PRIMARY KEY,
    tenant                text        NOT NULL,
    url                   text        NOT NULL,
    event_types           text[]      NOT NULL,
    description           text        NOT NULL,
    secret_generation     integer     NOT NULL,
    previous_secret_until timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    removed_at            timestamptz,
    removed_reason        text,
    last_event_id         uuid        NOT NULL
);
CREATE INDEX webhook_endpoints_by_tenant_idx ON webhook_endpoints (tenant) WHERE removed_at IS NULL;
