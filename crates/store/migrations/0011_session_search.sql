-- squidbot schema 11: full-text search over session transcripts. One row per entry with
-- text (messages, tool calls and results, summaries, background results), its FTS5
-- index, and per session file the size indexed, so a search can bring changed files in
-- step (the JSONL files stay the source of truth; this is rebuilt from them at will).

CREATE TABLE session_texts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    context TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (key, entry_id)
);

CREATE INDEX session_texts_context ON session_texts (context);

CREATE VIRTUAL TABLE session_texts_fts USING fts5 (
    text,
    content = 'session_texts',
    content_rowid = 'id',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER session_texts_fts_after_insert AFTER INSERT ON session_texts BEGIN
    INSERT INTO session_texts_fts (rowid, text) VALUES (new.id, new.text);
END;

CREATE TRIGGER session_texts_fts_after_delete AFTER DELETE ON session_texts BEGIN
    INSERT INTO session_texts_fts (session_texts_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

CREATE TABLE session_text_files (
    key TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    -- Bytes of the JSONL file when it was last indexed; another size means "read it again".
    size INTEGER NOT NULL
);
