"""The baseline: the Postgres job queue voxlog replaces, built as carefully as we would build it.

A jobs table claimed with ``SELECT ... FOR UPDATE SKIP LOCKED``, workers woken
by LISTEN/NOTIFY with a fallback poll, segments upserted on (job_id,
segment_index), status read from the table, duplicates coalesced by a unique
index on the fingerprint of live jobs. It drives the same engine objects,
FIFO, blob store and request validation as voxlog.
"""
