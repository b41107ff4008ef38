-- squidbot schema 1: long-term memories (rows, full-text index, links, change
-- counters), the session index, bulletin cache, system job ledger and settings.
-- The vector table (sqlite-vec `vec0`) is created by the store on the first vector,
-- because its dimension is only known then.

CREATE TABLE memories (
    id INTEGER PRIMARY KEY,
    context TEXT NOT NULL,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    importance REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    source TEXT NOT NULL,
    expires_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    accessed_at INTEGER,
    access_count INTEGER NOT NULL DEFAULT 0,
    -- Lower-case words of `content` joined by spaces: exact-duplicate lookup.
    normalized TEXT NOT NULL
);

CREATE INDEX memories_context_updated ON memories (context, updated_at);
CREATE INDEX memories_context_normalized ON memories (context, normalized);
CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content,
    tags,
    content = 'memories',
    content_rowid = 'id',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER memories_fts_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;

CREATE TRIGGER memories_fts_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.id, old.content, old.tags);
END;

CREATE TRIGGER memories_fts_after_update AFTER UPDATE OF content, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.id, old.content, old.tags);
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;

-- One counter per context, bumped by every insert, change and delete (recall's
-- access bookkeeping aside), so fingerprints change even when count and times do not.
CREATE TABLE memory_changes (
    context TEXT PRIMARY KEY,
    counter INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER memory_changes_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (context, counter) VALUES (new.context, 1)
    ON CONFLICT (context) DO UPDATE SET counter = counter + 1;
END;

CREATE TRIGGER memory_changes_after_update
AFTER UPDATE OF context, type, content, importance, tags, source, expires_at, updated_at ON memories BEGIN
    INSERT INTO memory_changes (context, counter) VALUES (new.context, 1)
    ON CONFLICT (context) DO UPDATE SET counter = counter + 1;
END;

CREATE TRIGGER memory_changes_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (context, counter) VALUES (old.context, 1)
    ON CONFLICT (context) DO UPDATE SET counter = counter + 1;
END;

CREATE TABLE memory_links (
    source INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    target INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    PRIMARY KEY (source, target, kind)
) WITHOUT ROWID;

CREATE INDEX memory_links_target ON memory_links (target);

CREATE TRIGGER memory_changes_after_link AFTER INSERT ON memory_links BEGIN
    INSERT INTO memory_changes (context, counter)
    SELECT context, 1 FROM memories WHERE id = new.source
    ON CONFLICT (context) DO UPDATE SET counter = counter + 1;
END;

CREATE TABLE sessions (
    key TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    archived_at INTEGER,
    message_count INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX sessions_status_updated ON sessions (status, updated_at);

CREATE TABLE memory_bulletins (
    context TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    generated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE system_jobs (
    name TEXT PRIMARY KEY,
    last_run INTEGER NOT NULL,
    last_error TEXT
) WITHOUT ROWID;

CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
