-- The dashboard's figures (throughput, phase latencies, the cache ratio) read the jobs that finished
-- in the last minutes; without an index each refresh would scan every job ever made.
CREATE INDEX jobs_completed_at ON jobs (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX jobs_failed_at ON jobs (failed_at) WHERE failed_at IS NOT NULL;
