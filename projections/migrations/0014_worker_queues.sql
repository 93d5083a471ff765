-- What each worker's latest heartbeat (NodeHeartbeat version 2) says it holds and what waits on it: every
-- claim it holds, the first jobs waiting on it in the order it would take them, and every waiting job counted
-- by tenant and priority (JSON arrays of contracts.scheduling's HeldClaim, QueuedJob and QueueCount). The API
-- reads a queued job's place and estimated start from them, and the dashboard each worker's queue.
ALTER TABLE node_heartbeats
    ADD COLUMN claims       jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN queue        jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN queue_counts jsonb NOT NULL DEFAULT '[]';
