-- Keys every replica must share, made once by whichever replica needs one
-- first: the browser session signing key, so that a session made by one
-- replica is accepted by the others behind the same load balancer.
CREATE TABLE shared_keys (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
