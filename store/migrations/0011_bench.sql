-- Benchmarks and A/B tests (gateway bench): each run of a suite, the
-- environments it compared, its tests and every sample, and the schedules
-- that start runs. Times are milliseconds since the epoch, as elsewhere.

-- One run of a suite. status is running, ok, failed or cancelled.
CREATE TABLE bench_runs (
    id              TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    owner_name      TEXT NOT NULL DEFAULT '',
    suite           TEXT NOT NULL,
    shape           TEXT NOT NULL DEFAULT '{}',
    provider        TEXT NOT NULL DEFAULT '',
    region          TEXT NOT NULL DEFAULT '',
    gateway_version TEXT NOT NULL DEFAULT '',
    options         TEXT NOT NULL DEFAULT '{}',
    schedule_id     TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL,
    error           TEXT NOT NULL DEFAULT '',
    started_at      BIGINT NOT NULL,
    finished_at     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX bench_runs_owner ON bench_runs (owner, started_at);
CREATE INDEX bench_runs_started ON bench_runs (started_at);

-- The environments of a run, by label: A and B, and A2 for the second set
-- of an A/A (null) run. packages holds the key package versions (JSON).
CREATE TABLE bench_run_envs (
    run_id   TEXT NOT NULL,
    label    TEXT NOT NULL,
    name     TEXT NOT NULL DEFAULT '',
    hash     TEXT NOT NULL DEFAULT '',
    image    TEXT NOT NULL DEFAULT '',
    packages TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, label)
);
CREATE INDEX bench_run_envs_name ON bench_run_envs (name);
CREATE INDEX bench_run_envs_hash ON bench_run_envs (hash);

-- The tests a run found in its suite.
CREATE TABLE bench_tests (
    run_id TEXT NOT NULL,
    name   TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);

-- One sample: one repeat of one test on one environment. Memory and
-- traffic are bytes; status is ok, failed or timeout.
CREATE TABLE bench_samples (
    run_id         TEXT NOT NULL,
    test           TEXT NOT NULL,
    env            TEXT NOT NULL,
    rep            INTEGER NOT NULL,
    wall_seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
    peak_managed   BIGINT NOT NULL DEFAULT 0,
    peak_unmanaged BIGINT NOT NULL DEFAULT 0,
    avg_managed    BIGINT NOT NULL DEFAULT 0,
    avg_unmanaged  BIGINT NOT NULL DEFAULT 0,
    spilled        BIGINT NOT NULL DEFAULT 0,
    transferred    BIGINT NOT NULL DEFAULT 0,
    cpu_seconds    DOUBLE PRECISION NOT NULL DEFAULT 0,
    status         TEXT NOT NULL,
    error          TEXT NOT NULL DEFAULT '',
    at             BIGINT NOT NULL,
    PRIMARY KEY (run_id, test, env, rep)
);
CREATE INDEX bench_samples_test ON bench_samples (test, at);

-- Schedules the gateway runs itself under the owner's identity. A replica
-- takes a due schedule by setting lease_holder while the lease is free or
-- expired, so each firing runs once across replicas.
CREATE TABLE bench_schedules (
    id            TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    owner_name    TEXT NOT NULL DEFAULT '',
    owner_groups  TEXT NOT NULL DEFAULT '[]',
    suite         TEXT NOT NULL,
    suite_archive TEXT NOT NULL DEFAULT '',
    envs          TEXT NOT NULL DEFAULT '[]',
    options       TEXT NOT NULL DEFAULT '{}',
    cron          TEXT NOT NULL,
    next_run      BIGINT NOT NULL,
    last_run      BIGINT NOT NULL DEFAULT 0,
    last_run_id   TEXT NOT NULL DEFAULT '',
    last_error    TEXT NOT NULL DEFAULT '',
    lease_holder  TEXT NOT NULL DEFAULT '',
    lease_expires BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX bench_schedules_owner ON bench_schedules (owner);
CREATE INDEX bench_schedules_due ON bench_schedules (next_run);
