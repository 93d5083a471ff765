-- The audio a job is expected to make (contracts/audio_estimate.py, computed by the projector from its
-- JobQueued): the backlog that admission and the sweeper judge counts work by what it costs, not by its
-- characters (a text at speed 0.25 is four times the work of the same text at 1.0, a break its seconds).
ALTER TABLE jobs ADD COLUMN expected_audio_ms integer NOT NULL DEFAULT 0;
-- Rows projected before this column: their text at their speed (15 characters a second at speed 1, the
-- estimate's rate; SSML's pauses are not known here), so that a live backlog is not read as empty.
UPDATE jobs SET expected_audio_ms = round(
    char_length(request->>'text') * 1000.0 / (15.0 * coalesce((request->>'speed')::float8, 1.0)));
