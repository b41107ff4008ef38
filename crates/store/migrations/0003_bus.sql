-- squidbot schema 3: the agent bus journal. One row per delivery attempt: a message that
-- waited in a trigger file has a `fallback.triggered` row and, once delivered, another.
-- `sender` and `target` hold the protocol's "from" and "to" (both SQL keywords).

CREATE TABLE bus_messages (
    id INTEGER PRIMARY KEY,
    -- Milliseconds since the Unix epoch.
    time INTEGER NOT NULL,
    sender TEXT NOT NULL,
    target TEXT NOT NULL,
    -- NULL when the message was refused before it got a sequence number.
    seq INTEGER,
    priority TEXT NOT NULL,
    body TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    -- delivered.verified, accepted.unverified, fallback.triggered or an error code.
    result TEXT NOT NULL,
    detail TEXT
);

CREATE INDEX bus_messages_time ON bus_messages (time);
CREATE INDEX bus_messages_correlation ON bus_messages (correlation_id);
