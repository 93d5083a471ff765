-- What degraded mode changed in a job's request (JobQueued version 5): the speed and sample rate its client
-- asked for, and why, as {speed, sample_rate, reason}; NULL for a job at the quality asked for (every job
-- recorded before).
ALTER TABLE jobs ADD COLUMN degraded_from jsonb;
