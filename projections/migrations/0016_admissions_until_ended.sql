-- An admission is kept until the projection shows its job ended, not ten minutes: while the projector lagged
-- past ten minutes a tenant's quotas and a key's live jobs were judged without the jobs it had just been
-- given (issue 40). audio_ms is the audio the job is expected to make (contracts/audio_estimate.py), counted
-- against the audio quotas until the job's own audio is in usage_daily.
ALTER TABLE admissions ADD COLUMN audio_ms integer NOT NULL DEFAULT 0;
