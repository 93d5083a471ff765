-- The document a job is a part of (JobQueued 8's document_id): the delivery process decides a document's
-- webhook outcome when one of its parts ends. A part queued before this column names none (NULL).
ALTER TABLE jobs ADD COLUMN document_id uuid;
