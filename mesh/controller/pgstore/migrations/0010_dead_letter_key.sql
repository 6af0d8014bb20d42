-- A dead letter of a bus that keeps no positions (AMQP) has no sequence in
-- DEAD: it is known by its consumer and its event's id. Every letter is
-- now kept by what it is known by, store.DeadLetter.Key: 'seq:' and its
-- DEAD sequence on twenty digits, or 'event:<consumer> <event id>'.
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_dead_seq_check;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_dead_seq_check CHECK (dead_seq >= 0);
ALTER TABLE dead_letters ADD COLUMN key text;
UPDATE dead_letters SET key = 'seq:' || lpad(dead_seq::text, 20, '0');
ALTER TABLE dead_letters ALTER COLUMN key SET NOT NULL;
ALTER TABLE dead_letters ADD PRIMARY KEY (key);
