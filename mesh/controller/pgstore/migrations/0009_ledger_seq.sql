-- The ledger is pruned (issue 18): each entry of a CONTROL message carries
-- the message's stream sequence, and goes once the message is gone from
-- the stream and the stream's duplicate window has passed
-- (controller.PruneLedger). 0 is an entry that is not a message's (the
-- answer a token was spent with), which is kept.
ALTER TABLE ledger ADD COLUMN seq bigint NOT NULL DEFAULT 0 CHECK (seq >= 0);

-- The entries of messages applied before: of sequence 1, so pruned once
-- old enough (controller.legacySeq).
UPDATE ledger SET seq = 1 WHERE key LIKE 'seq:%' OR key LIKE '% id:%';

-- A prune reads the entries below a sequence, and only message entries.
CREATE INDEX ledger_prune ON ledger (seq) WHERE seq > 0;
