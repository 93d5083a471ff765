-- The node registry: what each worker announced (engine, model version, voices).
CREATE TABLE nodes (
    worker_id     text PRIMARY KEY,
    engine        text        NOT NULL,
    model_version text        NOT NULL,
    device        text        NOT NULL,
    sample_rate   integer     NOT NULL,
    voices        text[]      NOT NULL,
    languages     text[]      NOT NULL,
    started_at    timestamptz NOT NULL,
    announced_at  timestamptz NOT NULL,
    last_event_id uuid        NOT NULL
);
CREATE INDEX nodes_engine_idx ON nodes (engine, announced_at DESC);
