-- What an API instance holds of a tenant's quotas and a key's live jobs, to admit submissions from memory
-- (issue 41: a submission took the tenant's advisory lock and about six round trips). A lease is counted in
-- the tenant's standing, as its admissions are, until the instance settles it (its jobs' admissions written
-- and the lease deleted, in one statement) or it expires (an instance gone: its jobs are counted by the
-- projection once projected).
CREATE TABLE admission_leases (
    lease_id uuid PRIMARY KEY,
    tenant text NOT NULL,
    key_id text,
    chars bigint NOT NULL,
    audio_ms bigint NOT NULL,
    live integer NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX admission_leases_tenant ON admission_leases (tenant);
