-- Clusters their owners share: one row per cluster and user or group.
-- subject is a user's stable id (their clusters' owner key, never a name
-- they may change) or a group's name; subject_name is the user's name when
-- shared, for display. allow lists what the share permits beyond viewing
-- and connecting ("scale,stop"). owner_member says whether the owner
-- belonged to the group when sharing it: with cluster.sharing: groups only
-- those shares count. A cluster's rows go with it.
CREATE TABLE cluster_shares (
    cluster      TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,
    kind         TEXT NOT NULL,
    subject      TEXT NOT NULL,
    subject_name TEXT NOT NULL DEFAULT '',
    allow        TEXT NOT NULL DEFAULT '',
    owner_member INTEGER NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    created_by   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (cluster, kind, subject)
);
-- "What is shared with me": by user id, or by each of the user's groups.
CREATE INDEX cluster_shares_subject ON cluster_shares (kind, subject);
-- Who a user name is, to share with user:NAME.
CREATE INDEX user_claims_name ON user_claims (name);
