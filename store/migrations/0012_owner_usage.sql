-- What each owner's live clusters (PENDING, STARTING, RUNNING) hold, kept
-- in the transaction of every cluster write, so that an admission reads
-- one row instead of every live cluster. vCPUs are kept in thousandths
-- and memory in MiB, whole numbers: sums that go up and down by the same
-- amounts come back to exactly zero, which floating point would not.
-- gen counts every write to the owner's clusters: an answer computed from
-- them (a cluster list) is current while gen has not moved.
-- The store fills both tables from the clusters table when this migration
-- runs (see recountUsage).
CREATE TABLE owner_usage (
    owner       TEXT PRIMARY KEY,
    gen         BIGINT NOT NULL DEFAULT 0,
    clusters    BIGINT NOT NULL DEFAULT 0,
    vcpu_milli  BIGINT NOT NULL DEFAULT 0,
    memory_mib  BIGINT NOT NULL DEFAULT 0,
    gpus        BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE owner_gpu_usage (
    owner    TEXT NOT NULL,
    gpu_type TEXT NOT NULL,
    gpus     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, gpu_type)
);
