-- The counter behind DB.Changes, moved after every write to clusters
-- commits. A sequence rather than a row: a row updated in each write's
-- transaction would queue every replica's cluster writes behind one
-- another, and nextval takes no lock that lasts. CACHE 1 (the default,
-- spelled out): with a cache, a session would hand out numbers ahead of
-- the others, and last_value would no longer mean that every number below
-- it has been handed out.
CREATE SEQUENCE store_changes_seq CACHE 1;
