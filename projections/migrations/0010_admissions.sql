-- What each API instance admitted that the projection may not show yet, so that per-key live jobs and
-- per-tenant quotas hold across API instances between a submission and its projection. Not a projection:
-- the API writes it (a replay does not rebuild it), and drops rows older than ten minutes as it writes.
CREATE TABLE admissions (
    job_id      uuid        PRIMARY KEY,
    tenant      text        NOT NULL,
    key_id      text,
    chars       integer     NOT NULL,
    live        boolean     NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX admissions_by_tenant_idx ON admissions (tenant, admitted_at);
