-- API tokens for automation. Only a SHA-256 hash of each token is kept.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    groups       TEXT NOT NULL DEFAULT '[]',
    read_only    INTEGER NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL DEFAULT 0,
    last_used_at BIGINT NOT NULL DEFAULT 0,
    revoked_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX api_tokens_owner ON api_tokens (owner);
