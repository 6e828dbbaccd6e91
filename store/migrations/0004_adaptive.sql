-- Adaptive scaling: the bounds within which the scheduler's own demand sets
-- the number of workers, and whether it is on.
ALTER TABLE clusters ADD COLUMN adaptive INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN adapt_min INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN adapt_max INTEGER NOT NULL DEFAULT 0;
