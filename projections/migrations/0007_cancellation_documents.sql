-- Cancellation (JobCancelled): a fourth terminal state, when and why.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'claimed', 'released', 'completed', 'failed', 'cancelled'));
ALTER TABLE jobs ADD COLUMN cancelled_at timestamptz, ADD COLUMN cancel_reason text;

-- Documents (DocumentSubmitted, on the nodes topic): chapters and parts; the parts are jobs whose ids
-- derive from the document id and the part's index, so their state is read from jobs.
CREATE TABLE documents (
    document_id     uuid PRIMARY KEY,
    title           text        NOT NULL,
    markup          text        NOT NULL,
    chapters        jsonb       NOT NULL,  -- [{"title": ..., "parts": n}, ...] in reading order
    breaks          text        NOT NULL,  -- one letter per part: s(entence), p(aragraph), c(hapter)
    part_count      integer     NOT NULL,
    total_chars     integer     NOT NULL,
    request         jsonb       NOT NULL,  -- the parts' common request
    priority        text        NOT NULL,
    idempotency_key text,
    submitted_at    timestamptz NOT NULL,
    last_event_id   uuid        NOT NULL
);
CREATE INDEX documents_idempotency_key_idx ON documents (idempotency_key) WHERE idempotency_key IS NOT NULL;
