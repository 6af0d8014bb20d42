-- Pushes and reports (issue 9): each node's newest declaration, the
-- description last pushed, and each node's last report. Declarations and
-- reports are JSON documents, read and replaced whole.

CREATE TABLE declarations (
    node     text PRIMARY KEY CHECK (node <> ''),
    revision bigint NOT NULL CHECK (revision > 0),
    document jsonb NOT NULL
);

-- One row at most.
CREATE TABLE description (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    yaml bytea NOT NULL CHECK (length(yaml) > 0)
);

CREATE TABLE reports (
    node     text PRIMARY KEY CHECK (node <> ''),
    document jsonb NOT NULL
);
