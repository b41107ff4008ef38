-- squidbot schema 9: usage summed per person (or context without one) and UTC day, kept
-- by triggers, so a budget check reads at most 31 rows instead of every call.

CREATE TABLE usage_daily (
    -- `user:<id>`, or `context:<context>` for calls without a user.
    subject TEXT NOT NULL,
    -- Days since 1970-01-01 (UTC), rounded down.
    day INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    -- Of the priced calls.
    cost REAL NOT NULL,
    PRIMARY KEY (subject, day)
) WITHOUT ROWID;

CREATE TRIGGER usage_daily_add AFTER INSERT ON usage BEGIN
    INSERT INTO usage_daily (subject, day, calls, input_tokens, output_tokens, cache_read_tokens,
                             cache_write_tokens, cost)
    VALUES (
        CASE WHEN new.user_id IS NULL THEN 'context:' || new.context ELSE 'user:' || new.user_id END,
        CASE WHEN new.at_ms >= 0 THEN new.at_ms / 86400000 ELSE -1 - ((-new.at_ms - 1) / 86400000) END,
        1, new.input_tokens, new.output_tokens, new.cache_read_tokens, new.cache_write_tokens,
        coalesce(new.cost, 0.0)
    )
    ON CONFLICT (subject, day) DO UPDATE SET
        calls = calls + 1,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
        cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
        cost = cost + excluded.cost;
END;

CREATE TRIGGER usage_daily_remove AFTER DELETE ON usage BEGIN
    UPDATE usage_daily SET
        calls = calls - 1,
        input_tokens = input_tokens - old.input_tokens,
        output_tokens = output_tokens - old.output_tokens,
        cache_read_tokens = cache_read_tokens - old.cache_read_tokens,
        cache_write_tokens = cache_write_tokens - old.cache_write_tokens,
        cost = cost - coalesce(old.cost, 0.0)
    WHERE subject = CASE WHEN old.user_id IS NULL THEN 'context:' || old.context ELSE 'user:' || old.user_id END
      AND day = CASE WHEN old.at_ms >= 0 THEN old.at_ms / 86400000 ELSE -1 - ((-old.at_ms - 1) / 86400000) END;
    DELETE FROM usage_daily
    WHERE calls <= 0
      AND subject = CASE WHEN old.user_id IS NULL THEN 'context:' || old.context ELSE 'user:' || old.user_id END;
END;

-- Usage moved to another context (a stranger's merged into a person's) moves its sums.
CREATE TRIGGER usage_daily_move AFTER UPDATE OF user_id, context, at_ms ON usage BEGIN
    UPDATE usage_daily SET
        calls = calls - 1,
        input_tokens = input_tokens - old.input_tokens,
        output_tokens = output_tokens - old.output_tokens,
        cache_read_tokens = cache_read_tokens - old.cache_read_tokens,
        cache_write_tokens = cache_write_tokens - old.cache_write_tokens,
        cost = cost - coalesce(old.cost, 0.0)
    WHERE subject = CASE WHEN old.user_id IS NULL THEN 'context:' || old.context ELSE 'user:' || old.user_id END
      AND day = CASE WHEN old.at_ms >= 0 THEN old.at_ms / 86400000 ELSE -1 - ((-old.at_ms - 1) / 86400000) END;
    DELETE FROM usage_daily WHERE calls <= 0;
    INSERT INTO usage_daily (subject, day, calls, input_tokens, output_tokens, cache_read_tokens,
                             cache_write_tokens, cost)
    VALUES (
        CASE WHEN new.user_id IS NULL THEN 'context:' || new.context ELSE 'user:' || new.user_id END,
        CASE WHEN new.at_ms >= 0 THEN new.at_ms / 86400000 ELSE -1 - ((-new.at_ms - 1) / 86400000) END,
        1, new.input_tokens, new.output_tokens, new.cache_read_tokens, new.cache_write_tokens,
        coalesce(new.cost, 0.0)
    )
    ON CONFLICT (subject, day) DO UPDATE SET
        calls = calls + 1,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
        cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
        cost = cost + excluded.cost;
END;

INSERT INTO usage_daily (subject, day, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost)
SELECT
    CASE WHEN user_id IS NULL THEN 'context:' || context ELSE 'user:' || user_id END,
    CASE WHEN at_ms >= 0 THEN at_ms / 86400000 ELSE -1 - ((-at_ms - 1) / 86400000) END,
    count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens),
    total(cost)
FROM usage
GROUP BY 1, 2;
