-- A lease per replica: each replica renews its own row in one statement,
-- and a cluster's lease (clusters.lease_holder) stays in force while its
-- holder's row is fresh, or until the cluster's own lease_expires, which
-- the holder sets when it takes the lease. Renewing no longer rewrites
-- every cluster row (they are wide: certificate and key).
CREATE TABLE replicas (
    id      TEXT PRIMARY KEY,
    expires BIGINT NOT NULL
);
-- The sweep's read of every active cluster's version and lease, from the
-- index alone; it serves what clusters_status served as well.
CREATE INDEX clusters_active_leases ON clusters (status, name, version, lease_holder, lease_expires);
DROP INDEX clusters_status;
