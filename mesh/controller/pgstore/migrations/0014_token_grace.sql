-- A token's grace (store.Token.Grace): how long its user stays on the bus
-- once it is spent or expired, as it was issued (token issue --grace), in
-- milliseconds; 0 for the grace every composer is given, which is what a
-- token issued before this migration keeps.
ALTER TABLE tokens ADD COLUMN grace_ms bigint NOT NULL DEFAULT 0 CHECK (grace_ms >= 0);
