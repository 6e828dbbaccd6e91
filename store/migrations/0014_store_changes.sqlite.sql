-- The counter behind DB.Changes: every write to clusters adds one to it in
-- its own transaction. SQLite has one writer at a time, so the row costs
-- no contention, and the number is exact.
CREATE TABLE store_changes (
    id  INTEGER PRIMARY KEY,
    seq BIGINT NOT NULL
);
INSERT INTO store_changes (id, seq) VALUES (1, 0);
