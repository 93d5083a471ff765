-- What makes each segment's audio (SegmentProduced version 2), and whether it was reused rather than
-- synthesized: a worker looks up a segment's key before synthesizing it.
ALTER TABLE segments ADD COLUMN segment_key text;
ALTER TABLE segments ADD COLUMN reused boolean NOT NULL DEFAULT false;
CREATE INDEX segments_key_idx ON segments (segment_key) WHERE segment_key IS NOT NULL;
