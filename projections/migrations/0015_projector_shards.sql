-- Projector shards (projections/shards.py): several projectors split the partitions of the log, and the one
-- that owns a partition is the only one whose batches move its offsets. A projector given a partition bumps
-- its generation (and reads where to resume in the same statement); every batch moves the offsets only where
-- the generation is still the one its projector was given, in the batch's own statement, so a projector that
-- lost the partition in a rebalance it slept through can never write a batch for it afterwards.
ALTER TABLE projection_offsets ADD COLUMN generation bigint NOT NULL DEFAULT 0;

-- Refuses (rolls back) the statement that calls it when fewer offsets moved than the batch had partitions (a
-- newer owner holds the rest: SQLSTATE VXF01, projections.errors.Fenced), or fewer shared rows were written
-- than the batch changed (another projector changed one since the batch read it: SQLSTATE VXC01,
-- projections.errors.SharedRowChanged; projections/shared_rows.py).
CREATE FUNCTION projector_fence(partitions integer, moved bigint, changes integer, written bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF moved <> partitions THEN
        RAISE EXCEPTION 'fenced: a newer owner holds % of the batch''s % partitions', partitions - moved, partitions
            USING ERRCODE = 'VXF01';
    END IF;
    IF written <> changes THEN
        RAISE EXCEPTION 'another projector changed % of the % shared rows this batch changes since it read them',
            changes - written, changes USING ERRCODE = 'VXC01';
    END IF;
    RETURN moved;
END
$$;
