-- Webhook deliveries, from WebhookDeliveryRecorded on the nodes topic: each delivery as its latest record
-- says (made when an outcome is due to an endpoint, recorded again whole after each attempt). The delivery
-- process reads the pending ones; GET /v1/webhooks/{id}/deliveries and voxlog audit list them.
CREATE TABLE webhook_deliveries (
    delivery_id      uuid PRIMARY KEY,
    endpoint_id      uuid        NOT NULL,
    tenant           text        NOT NULL,
    event_type       text        NOT NULL,
    job_id           uuid,
    document_id      uuid,
    body             text        NOT NULL,
    traceparent      text,
    created_at       timestamptz NOT NULL,
    state            text        NOT NULL,
    attempts         integer     NOT NULL,
    next_attempt_at  timestamptz,
    last_status      integer,
    last_error       text        NOT NULL,
    last_duration_ms integer,
    updated_at       timestamptz NOT NULL,
    last_event_id    uuid        NOT NULL
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
CREATE INDEX webhook_deliveries_by_job_idx ON webhook_deliveries (job_id) WHERE job_id IS NOT NULL;
