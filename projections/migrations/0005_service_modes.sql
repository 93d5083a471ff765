-- Each source's latest switch of a service mode (cache-only so far): the operator's and the backlog's.
-- The API refuses new syntheses while any source holds a mode on.
CREATE TABLE service_modes (
    mode          text        NOT NULL,
    source        text        NOT NULL,
    enabled       boolean     NOT NULL,
    reason        text        NOT NULL,
    set_at        timestamptz NOT NULL,
    last_event_id uuid        NOT NULL,
    PRIMARY KEY (mode, source)
);

-- The backlog estimate sums the text of live jobs: read them without scanning every job ever.
CREATE INDEX jobs_live_idx ON jobs (state) WHERE state IN ('queued', 'claimed', 'released');
