-- squidbot schema 6: who may talk to the assistant on the chat channels.

-- Senders the owner approved (`squidbot users approve CODE`), per channel.
CREATE TABLE approved_senders (
    channel TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    display_name TEXT,
    approved_at_ms INTEGER NOT NULL,
    PRIMARY KEY (channel, sender_id)
);

-- Pairing codes handed to strangers under the `pairing` policy and not yet approved.
-- Kept here rather than in the gateway's memory so the CLI, another process, can approve
-- them and a restart doesn't void them.
CREATE TABLE pairing_codes (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    display_name TEXT,
    issued_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);

CREATE INDEX pairing_codes_sender ON pairing_codes (channel, sender_id);
