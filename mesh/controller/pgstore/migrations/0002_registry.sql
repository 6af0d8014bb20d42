-- The living mesh's registry (issue 9): the enrolment tokens issued, the
-- nodes enrolled, and the ledger of the CONTROL messages applied. A
-- handler's effect and its ledger row commit in one transaction.

-- Enrolment tokens, spent or not. A token's secret is its enrolment
-- user's password, in secrets, while it is unspent.
CREATE TABLE tokens (
    id      text PRIMARY KEY CHECK (id <> ''),
    node    text NOT NULL CHECK (node <> ''),
    issued  timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    spent   timestamptz
);

-- Enrolled nodes and the key their credentials are sealed to.
CREATE TABLE nodes (
    name        text PRIMARY KEY CHECK (name <> ''),
    sealing_key text NOT NULL CHECK (sealing_key <> ''),
    enrolled    timestamptz NOT NULL,
    token       text NOT NULL
);

-- The ledger: one row per CONTROL message applied, by its key
-- (controller.LedgerKey), with what answering it again needs.
CREATE TABLE ledger (
    key     text PRIMARY KEY CHECK (key <> ''),
    at      timestamptz NOT NULL,
    outcome bytea
);
