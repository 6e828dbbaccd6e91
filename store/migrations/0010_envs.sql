-- Environments (package envs): their builds, who asked for them, and the
-- ones admins published at run time. Every replica on one database shares
-- them, and they outlive a restart.

-- One row per environment hash: the latest build's status. holder is the
-- replica building it ('' once the build ended) and heartbeat when that
-- replica last said it still is; a build whose holder fell silent is
-- treated as failed and may be claimed again.
CREATE TABLE env_builds (
    hash        TEXT PRIMARY KEY,
    ref         TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    steps       TEXT NOT NULL DEFAULT '[]',
    error       TEXT NOT NULL DEFAULT '',
    contents    TEXT NOT NULL DEFAULT '{}',
    digest      TEXT NOT NULL DEFAULT '',
    built       INTEGER NOT NULL DEFAULT 0,
    started_at  BIGINT NOT NULL DEFAULT 0,
    finished_at BIGINT NOT NULL DEFAULT 0,
    updated_at  BIGINT NOT NULL,
    holder      TEXT NOT NULL DEFAULT '',
    heartbeat   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX env_builds_holder ON env_builds (holder);

-- The build log of each environment: its last MiB.
CREATE TABLE env_build_logs (
    hash       TEXT PRIMARY KEY,
    log        TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Who asked for which environment: its image runs only for them (or for
-- everyone once published), and only they see its status and log.
CREATE TABLE env_askers (
    hash        TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    first_asked BIGINT NOT NULL,
    last_asked  BIGINT NOT NULL,
    PRIMARY KEY (hash, user_id)
);
CREATE INDEX env_askers_user ON env_askers (user_id, hash);

-- Environments published by admins at run time (images.environments in
-- the config are published too, and are not stored here).
CREATE TABLE env_published (
    name        TEXT PRIMARY KEY,
    image       TEXT NOT NULL,
    env_hash    TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL
);
