-- Leases: with several gateway replicas on one database, each cluster is
-- reconciled by one replica at a time; a replica that dies hands its
-- clusters over when its leases expire.
ALTER TABLE clusters ADD COLUMN lease_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE clusters ADD COLUMN lease_expires BIGINT NOT NULL DEFAULT 0;
