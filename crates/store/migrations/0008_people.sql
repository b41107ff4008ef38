-- squidbot schema 8: people. Users with roles and budgets, the chat identities linked to
-- them, every model call's usage, the approval requests that wait for an admin and the
-- keyed, chained audit trail. Times are milliseconds since the Unix epoch.

CREATE TABLE users (
    -- Short id: lower-case letters, digits, `-` and `_`.
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    -- A people's role (`[user_roles.<role>]`), never an agent role.
    role TEXT NOT NULL,
    -- Their memory context: `owner` for the onboarded admin, else `user:<id>`.
    context TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    -- Their own budget over the role's; NULL is no limit.
    budget_daily_tokens INTEGER,
    budget_monthly_tokens INTEGER,
    budget_daily_cost REAL,
    budget_monthly_cost REAL,
    -- Hash of their gateway token; NULL when they have none.
    token_hash TEXT UNIQUE,
    token_created_ms INTEGER
);

-- A person's accounts on the chat channels; one account belongs to one person.
CREATE TABLE identities (
    channel TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    linked_ms INTEGER NOT NULL,
    PRIMARY KEY (channel, sender_id)
);

CREATE INDEX identities_user ON identities (user_id);

-- One row per model call. `user_id` is NULL for strangers and machine turns, whose
-- usage counts against their context instead. No foreign key: removing a user keeps
-- the history until it is purged.
CREATE TABLE usage (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    user_id TEXT,
    context TEXT NOT NULL,
    session_key TEXT NOT NULL,
    agent TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    -- NULL when the model has no price.
    cost REAL
);

CREATE INDEX usage_user_time ON usage (user_id, at_ms);
CREATE INDEX usage_context_time ON usage (context, at_ms);
CREATE INDEX usage_time ON usage (at_ms);

-- Budget warnings already given (a person and a budget period each), so each is given
-- once across restarts and processes.
CREATE TABLE usage_notices (
    key TEXT PRIMARY KEY,
    at_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- Tool calls waiting for an admin, and how they ended.
CREATE TABLE approvals (
    -- Upper case, as people type it (`/approve 7F3K2Q`).
    id TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    -- Who asked: the `Actor` as JSON.
    actor_json TEXT NOT NULL,
    session_key TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    rule TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'abandoned')),
    -- The admin who approved or denied.
    decided_by TEXT,
    -- What a denying admin said.
    reason TEXT,
    decided_ms INTEGER
);

CREATE INDEX approvals_status ON approvals (status, created_ms);

-- The audit trail: each row's keyed hash covers its fields and the previous row's hash
-- (core's `people::audit`). Rows are only appended, and deleted from the front by
-- retention.
CREATE TABLE audit_log (
    seq INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    subject TEXT NOT NULL,
    ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);

CREATE INDEX audit_log_time ON audit_log (at_ms);

-- The chain's head, kept apart from the rows so deleting the last rows is noticed: where
-- the kept chain starts and ends, sealed with the key.
CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    first_seq INTEGER NOT NULL,
    first_prev TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    last_hash TEXT NOT NULL,
    mac TEXT NOT NULL
);
