-- Where the API placed each fingerprint's jobs in the jobs topic (producers/placement.py): the first
-- submission of a fingerprint writes its route, every later one finds it, so duplicates meet in one
-- partition. Not a projection: the API writes it before it publishes a JobQueued, and a replay does not
-- rebuild it (without it a job goes to its key's partition; at worst a duplicate is synthesized twice).
CREATE TABLE placements (
    fingerprint     text        PRIMARY KEY,
    kafka_partition integer     NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX placements_expires_idx ON placements (expires_at);
