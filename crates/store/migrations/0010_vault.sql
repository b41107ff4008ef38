-- squidbot schema 10: the secrets vault. Values are sealed with XChaCha20-Poly1305 under
-- the vault key (a key file or a passphrase, never stored here) with the name bound as
-- associated data, so a row moved under another name fails to open. The key check and
-- the passphrase salt live in `meta` (`vault.check`, `vault.salt`, `vault.key_source`).

CREATE TABLE vault_secrets (
    -- `[A-Za-z0-9_.-]{1,64}`, as referenced by `secret:NAME` in the config.
    name TEXT PRIMARY KEY NOT NULL,
    -- 24 random bytes, fresh for every write.
    nonce BLOB NOT NULL,
    -- The value sealed with its 16-byte tag.
    ciphertext BLOB NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    -- Written at most once a minute per secret; NULL until first read.
    last_used_ms INTEGER
) WITHOUT ROWID;
