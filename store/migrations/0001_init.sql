-- Clusters: one row per cluster, the single source of truth for its lifecycle.
-- Times are Unix milliseconds so that SQLite and PostgreSQL store them alike.
CREATE TABLE clusters (
    name              TEXT PRIMARY KEY,
    owner             TEXT NOT NULL,
    status            TEXT NOT NULL,
    phase             TEXT NOT NULL DEFAULT '',
    reason            TEXT NOT NULL DEFAULT '',
    provider          TEXT NOT NULL,
    options           TEXT NOT NULL DEFAULT '{}',
    desired_workers   INTEGER NOT NULL DEFAULT 0,
    next_worker_seq   INTEGER NOT NULL DEFAULT 0,
    ready_workers     INTEGER NOT NULL DEFAULT 0,
    tls_cert          TEXT NOT NULL,
    tls_key           TEXT NOT NULL,
    scheduler_address TEXT NOT NULL DEFAULT '',
    dashboard_address TEXT NOT NULL DEFAULT '',
    created_at        BIGINT NOT NULL,
    started_at        BIGINT NOT NULL DEFAULT 0,
    stopped_at        BIGINT NOT NULL DEFAULT 0,
    updated_at        BIGINT NOT NULL,
    version           BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX clusters_owner_status ON clusters (owner, status);
CREATE INDEX clusters_status ON clusters (status);

-- Lifecycle events, for `gateway show` and post-mortems.
CREATE TABLE cluster_events (
    id      {{AUTOID}},
    cluster TEXT NOT NULL,
    at      BIGINT NOT NULL,
    kind    TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX cluster_events_cluster ON cluster_events (cluster, id);
