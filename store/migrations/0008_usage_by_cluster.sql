-- The open intervals of one cluster (read by every health poll, closed by
-- every stop): without this index SQLite chose usage_events_stop and read
-- every running member of every cluster, so the cost of an idle gateway
-- grew with the square of its clusters.
CREATE INDEX usage_events_cluster_open ON usage_events (cluster, kind, stop_at);
