-- Each worker's latest heartbeat: alive, and what it is doing. The sweeper reads heartbeats from
-- the log itself (a lagging projection must not make a live worker look dead); this table serves
-- status pages and dashboards.
CREATE TABLE node_heartbeats (
    worker_id      text PRIMARY KEY,
    engine         text             NOT NULL,
    model_version  text             NOT NULL,
    device         text             NOT NULL,
    started_at     timestamptz      NOT NULL,
    sent_at        timestamptz      NOT NULL,
    job_id         uuid,
    fingerprint    text,
    attempt        integer,
    segments_done  integer          NOT NULL,
    segments_total integer,
    text_chars     integer,
    progress_at    timestamptz,
    chars_per_s    double precision,
    busy_s         double precision NOT NULL,
    last_event_id  uuid             NOT NULL
);
