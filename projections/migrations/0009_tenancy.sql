-- Tenancy: who owns each job and document, the API keys, each tenant's usage by day, and the rate limits'
-- token buckets.

-- Everything recorded before tenants existed is the default tenant's.
ALTER TABLE jobs ADD COLUMN tenant text NOT NULL DEFAULT 'default', ADD COLUMN key_id text;
-- An API key's live jobs, for its limit of concurrent jobs.
CREATE INDEX jobs_live_by_key_idx ON jobs (key_id) WHERE state IN ('queued', 'claimed', 'released');
ALTER TABLE documents ADD COLUMN tenant text NOT NULL DEFAULT 'default';

-- The API keys, from ApiKeyIssued and ApiKeyRevoked on the nodes topic: a hash of each secret, never the
-- secret itself.
CREATE TABLE api_keys (
    key_id        text PRIMARY KEY,
    tenant        text        NOT NULL,
    name          text        NOT NULL,
    scopes        text[]      NOT NULL,
    secret_sha256 text        NOT NULL,
    issued_at     timestamptz,
    expires_at    timestamptz,
    revoked_at    timestamptz,
    revoke_reason text,
    last_event_id uuid        NOT NULL
);

-- Each tenant's use by day (UTC) of its jobs' submission: a projection of the log like any other, which
-- replay rebuilds; quotas are judged from it.
CREATE TABLE usage_daily (
    tenant               text   NOT NULL,
    day                  date   NOT NULL,
    requests             bigint NOT NULL,
    chars                bigint NOT NULL,
    syntheses            bigint NOT NULL,
    audio_ms_synthesized bigint NOT NULL,
    audio_ms_reused      bigint NOT NULL,
    PRIMARY KEY (tenant, day)
);

-- The API's token buckets of its per-key rate limits, shared by every API instance. Not a projection: the
-- API writes it as requests come (a replay does not rebuild it, and a lost bucket only refills early).
CREATE TABLE rate_buckets (
    key_id     text             PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz      NOT NULL
);
