-- When each word of a segment is said in its audio (SegmentProduced version 3), for captions: a JSON
-- array of {start, end, start_ms, end_ms}; NULL for a segment recorded before, or by an engine that
-- cannot tell.
ALTER TABLE segments ADD COLUMN words jsonb;
