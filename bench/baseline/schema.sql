-- The baseline job queue. Applied with CREATE ... IF NOT EXISTS into its own schema.

CREATE TABLE IF NOT EXISTS bl_nodes (
    worker_id     text PRIMARY KEY,
    engine        text        NOT NULL,
    model_version text        NOT NULL,
    sample_rate   integer     NOT NULL,
    voices        text[]      NOT NULL,
    languages     text[]      NOT NULL,
    announced_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per submission. A duplicate of a live job points at it (source_job_id)
-- and is never queued itself: its status is the source's.
CREATE TABLE IF NOT EXISTS bl_jobs (
    job_id            uuid PRIMARY KEY,
    fingerprint       text        NOT NULL,
    request           jsonb       NOT NULL,
    state             text        NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'claimed', 'completed', 'failed', 'duplicate')),
    source_job_id     uuid REFERENCES bl_jobs (job_id),
    attempts          integer     NOT NULL DEFAULT 0,
    worker_id         text,
    segment_count     integer,
    total_duration_ms integer,
    error             text,
    submitted_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at        timestamptz,
    heartbeat_at      timestamptz,
    completed_at      timestamptz
);
-- The claim query walks this index in submission order, skipping locked rows.
CREATE INDEX IF NOT EXISTS bl_jobs_queue_idx ON bl_jobs (submitted_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS bl_jobs_stale_idx ON bl_jobs (heartbeat_at) WHERE state = 'claimed';
-- At most one live (not failed, not a duplicate) job per fingerprint: the coalescing point.
CREATE UNIQUE INDEX IF NOT EXISTS bl_jobs_live_fingerprint_idx ON bl_jobs (fingerprint)
    WHERE state IN ('queued', 'claimed', 'completed');

CREATE TABLE IF NOT EXISTS bl_segments (
    job_id        uuid        NOT NULL REFERENCES bl_jobs (job_id),
    segment_index integer     NOT NULL,
    span_start    integer     NOT NULL,
    span_end      integer     NOT NULL,
    span_text     text        NOT NULL,
    audio_sha256  text        NOT NULL,
    audio_uri     text        NOT NULL,
    duration_ms   integer     NOT NULL,
    sample_rate   integer     NOT NULL,
    byte_length   integer     NOT NULL,
    produced_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, segment_index)
);
