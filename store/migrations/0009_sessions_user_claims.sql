-- Browser sessions. The cookie holds a random secret; only its SHA-256 is
-- kept. A session ends at its expiry, at logout, when revoked, or with the
-- API token that minted it (token_id).
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    owner      TEXT NOT NULL,
    owner_name TEXT NOT NULL DEFAULT '',
    via        TEXT NOT NULL DEFAULT '',
    token_id   TEXT NOT NULL DEFAULT '',
    read_only  INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_owner ON sessions (owner);
CREATE INDEX sessions_token ON sessions (token_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- The claims of each OIDC user's latest login (name, email, groups), as the
-- identity provider asserted them at claims_at (the ID token's iat). API
-- tokens and browser sessions take groups from here, not from the moment
-- they were made, and only while claims_at is recent enough.
CREATE TABLE user_claims (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL DEFAULT '',
    email      TEXT NOT NULL DEFAULT '',
    groups     TEXT NOT NULL DEFAULT '[]',
    claims_at  BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
