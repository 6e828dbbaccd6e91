-- The change count moves with every write to clusters that another
-- replica needs to see, whoever makes it: a row added or removed, a new
-- version (every UpdateCluster and UpdateOwned that writes), a lease that
-- changes hands. A holder renewing its own lease (lease_expires alone) is
-- news to nobody. In the writing statement's own transaction, so the
-- count stays exact, and the sweep needs no periodic full read of the
-- leases as a safety net on SQLite, even for writes of another release.
-- (A trigger's body is on its line: migrations split on a line's last ";".)
CREATE TRIGGER clusters_changes_insert AFTER INSERT ON clusters
    BEGIN UPDATE store_changes SET seq = seq + 1 WHERE id = 1; END;
CREATE TRIGGER clusters_changes_delete AFTER DELETE ON clusters
    BEGIN UPDATE store_changes SET seq = seq + 1 WHERE id = 1; END;
CREATE TRIGGER clusters_changes_update AFTER UPDATE ON clusters
    WHEN NEW.version IS NOT OLD.version OR NEW.lease_holder IS NOT OLD.lease_holder
        OR NEW.status IS NOT OLD.status OR NEW.name IS NOT OLD.name
    BEGIN UPDATE store_changes SET seq = seq + 1 WHERE id = 1; END;
