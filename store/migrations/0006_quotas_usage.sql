-- Quotas and usage accounting.
-- Who owns a cluster, as quotas see them (name and groups at creation, so
-- that adaptive scale-ups are checked against the right entries), and the
-- cluster's shape: where it runs and the size of its members.
ALTER TABLE clusters ADD COLUMN owner_name TEXT NOT NULL DEFAULT '';
ALTER TABLE clusters ADD COLUMN owner_groups TEXT NOT NULL DEFAULT '[]';
ALTER TABLE clusters ADD COLUMN shape TEXT NOT NULL DEFAULT '{}';
CREATE INDEX clusters_owner_name ON clusters (owner_name, created_at);

-- Quota entries set through the admin API (the configuration file's
-- entries are not stored). limits is a JSON object of the fields set.
CREATE TABLE quota_entries (
    subject    TEXT PRIMARY KEY,
    limits     TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL DEFAULT ''
);

-- Every admin change: who, what, the state before and after, when.
CREATE TABLE audit_log (
    id           {{AUTOID}},
    at           BIGINT NOT NULL,
    actor        TEXT NOT NULL,
    actor_id     TEXT NOT NULL DEFAULT '',
    action       TEXT NOT NULL,
    target       TEXT NOT NULL,
    before_state TEXT NOT NULL DEFAULT '',
    after_state  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at);

-- The usage ledger: one 'start' and at most one 'stop' per member of a
-- cluster (unique), each carrying the member's size and price, so that a
-- repeated write after a crash changes nothing and time is never counted
-- twice. A start row also carries its stop's time (stop_at; the largest
-- BIGINT while open), so that the intervals overlapping a window are found
-- by index, whatever the length of the history.
CREATE TABLE usage_events (
    id            {{AUTOID}},
    cluster       TEXT NOT NULL,
    member        TEXT NOT NULL,
    kind          TEXT NOT NULL,
    at            BIGINT NOT NULL,
    owner         TEXT NOT NULL,
    owner_name    TEXT NOT NULL DEFAULT '',
    vcpus         DOUBLE PRECISION NOT NULL DEFAULT 0,
    memory_gib    DOUBLE PRECISION NOT NULL DEFAULT 0,
    gpus          INTEGER NOT NULL DEFAULT 0,
    gpu_type      TEXT NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    price_hour    DOUBLE PRECISION NOT NULL DEFAULT 0,
    stop_at       BIGINT NOT NULL DEFAULT 9223372036854775807
);
CREATE UNIQUE INDEX usage_events_member ON usage_events (cluster, member, kind);
CREATE INDEX usage_events_owner_stop ON usage_events (owner, kind, stop_at);
CREATE INDEX usage_events_name_stop ON usage_events (owner_name, kind, stop_at);
CREATE INDEX usage_events_stop ON usage_events (kind, stop_at);
