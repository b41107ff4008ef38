-- squidbot schema 2: one row per memory context holding its memory count (the vector
-- search picks exact or bit-vector search by it without counting rows) and its change
-- counter, replacing `memory_changes`. Counters carry over, so fingerprints do not
-- change across the migration.

DROP TRIGGER memory_changes_after_insert;
DROP TRIGGER memory_changes_after_update;
DROP TRIGGER memory_changes_after_delete;
DROP TRIGGER memory_changes_after_link;

CREATE TABLE memory_contexts (
    context TEXT PRIMARY KEY,
    memories INTEGER NOT NULL,
    changes INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO memory_contexts (context, memories, changes)
SELECT counted.context, counted.memories, coalesce(changes.counter, counted.memories)
FROM (SELECT context, count(*) AS memories FROM memories GROUP BY context) AS counted
LEFT JOIN memory_changes AS changes ON changes.context = counted.context;

INSERT INTO memory_contexts (context, memories, changes)
SELECT context, 0, counter FROM memory_changes WHERE context NOT IN (SELECT context FROM memory_contexts);

DROP TABLE memory_changes;

CREATE TRIGGER memory_contexts_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_contexts (context, memories, changes) VALUES (new.context, 1, 1)
    ON CONFLICT (context) DO UPDATE SET memories = memories + 1, changes = changes + 1;
END;

CREATE TRIGGER memory_contexts_after_delete AFTER DELETE ON memories BEGIN
    UPDATE memory_contexts SET memories = memories - 1, changes = changes + 1 WHERE context = old.context;
END;

CREATE TRIGGER memory_contexts_after_update
AFTER UPDATE OF type, content, importance, tags, source, expires_at, updated_at ON memories BEGIN
    UPDATE memory_contexts SET changes = changes + 1 WHERE context = new.context;
END;

CREATE TRIGGER memory_contexts_after_move AFTER UPDATE OF context ON memories
WHEN old.context IS NOT new.context BEGIN
    UPDATE memory_contexts SET memories = memories - 1, changes = changes + 1 WHERE context = old.context;
    INSERT INTO memory_contexts (context, memories, changes) VALUES (new.context, 1, 1)
    ON CONFLICT (context) DO UPDATE SET memories = memories + 1, changes = changes + 1;
END;

CREATE TRIGGER memory_contexts_after_link AFTER INSERT ON memory_links BEGIN
    UPDATE memory_contexts SET changes = changes + 1
    WHERE context = (SELECT context FROM memories WHERE id = new.source);
END;
