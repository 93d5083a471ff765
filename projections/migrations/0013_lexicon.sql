-- The server's lexicon, from LexiconEntrySet and LexiconEntryRemoved on the nodes topic: each word's latest
-- entry. A removed word keeps its row with no phonemes, so that an older record of it never brings it back;
-- the API reads the rows that have phonemes.
CREATE TABLE lexicon (
    word          text PRIMARY KEY,
    phonemes      text,
    reason        text        NOT NULL,
    set_at        timestamptz NOT NULL,
    last_event_id uuid        NOT NULL
);
