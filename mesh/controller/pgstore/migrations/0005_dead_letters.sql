-- The dead letters folded from DEAD (controller.DeadLetter), by their
-- sequence in DEAD.
CREATE TABLE dead_letters (
    dead_seq bigint PRIMARY KEY CHECK (dead_seq > 0),
    document jsonb NOT NULL
);
