-- A run's lease: its client renews it while the run goes on. A running
-- run whose lease expired has lost its client: the gateway stops the
-- run's clusters and marks it failed, and its samples stay out of
-- baselines. 0 is no lease (a run recorded by an older client).
ALTER TABLE bench_runs ADD COLUMN lease_expires BIGINT NOT NULL DEFAULT 0;
CREATE INDEX bench_runs_lease ON bench_runs (status, lease_expires);

-- The clusters a run started, for the gateway to stop them.
CREATE TABLE bench_run_clusters (
    run_id  TEXT NOT NULL,
    cluster TEXT NOT NULL,
    PRIMARY KEY (run_id, cluster)
);
