-- Projection tables: read models of the job event log. Every row can be
-- rebuilt by replaying the log from offset 0.

-- One row per job: its current state and the attempt that owns it.
CREATE TABLE jobs (
    job_id            uuid PRIMARY KEY,
    fingerprint       text        NOT NULL,
    state             text        NOT NULL
        CHECK (state IN ('queued', 'claimed', 'released', 'completed', 'failed')),
    attempt           integer     NOT NULL DEFAULT 0,
    request           jsonb       NOT NULL,
    idempotency_key   text,
    worker_id         text,
    cache_hit         boolean     NOT NULL DEFAULT false,
    source_job_id     uuid,
    segment_count     integer,
    total_duration_ms integer,
    release_reason    text,
    not_before        timestamptz,
    error_code        text,
    error_message     text,
    submitted_at      timestamptz NOT NULL,
    claimed_at        timestamptz,
    completed_at      timestamptz,
    failed_at         timestamptz,
    updated_at        timestamptz NOT NULL,
    last_event_id     uuid        NOT NULL
);
CREATE INDEX jobs_fingerprint_idx ON jobs (fingerprint);
-- The sweeper scans live claims by age.
CREATE INDEX jobs_live_claims_idx ON jobs (updated_at) WHERE state = 'claimed';
CREATE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Audio segments of a job's current attempt (older attempts' rows are replaced).
CREATE TABLE segments (
    job_id        uuid        NOT NULL,
    segment_index integer     NOT NULL,
    attempt       integer     NOT NULL,
    span_start    integer     NOT NULL,
    span_end      integer     NOT NULL,
    span_text     text        NOT NULL,
    audio_sha256  text        NOT NULL,
    audio_uri     text        NOT NULL,
    duration_ms   integer     NOT NULL,
    sample_rate   integer     NOT NULL,
    byte_length   integer     NOT NULL,
    produced_at   timestamptz NOT NULL,
    PRIMARY KEY (job_id, segment_index)
);

-- The audit read model: every event once, with where it sits in the log.
CREATE TABLE job_events (
    event_id       uuid PRIMARY KEY,
    job_id         uuid        NOT NULL,
    fingerprint    text        NOT NULL,
    type           text        NOT NULL,
    schema_version integer     NOT NULL,
    attempt        integer     NOT NULL,
    occurred_at    timestamptz NOT NULL,
    producer       text        NOT NULL,
    topic          text        NOT NULL,
    kafka_partition integer    NOT NULL,
    kafka_offset   bigint      NOT NULL,
    payload        jsonb       NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_events_job_idx ON job_events (job_id, kafka_offset);

-- Fingerprint -> completed job, with a TTL and LRU bookkeeping for the byte cap.
CREATE TABLE result_cache (
    fingerprint       text PRIMARY KEY,
    job_id            uuid        NOT NULL,
    segment_count     integer     NOT NULL,
    total_duration_ms integer     NOT NULL,
    total_bytes       bigint      NOT NULL,
    created_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    last_hit_at       timestamptz NOT NULL
);
CREATE INDEX result_cache_expires_idx ON result_cache (expires_at);
CREATE INDEX result_cache_lru_idx ON result_cache (last_hit_at);

-- Where each projector resumes: advanced in the same transaction as the rows it wrote.
CREATE TABLE projection_offsets (
    consumer    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    next_offset bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, partition)
);
