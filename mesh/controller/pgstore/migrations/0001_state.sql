-- The controller's state as issue 8 left it (docs/controller-store.md).
-- Every table holding a secret is the controller's alone: the database
-- must be too.

-- The genesis: its row is the mark that a state exists (Create writes it
-- with everything else in one transaction), and holds the mesh's
-- certificate authority. One row at most.
CREATE TABLE genesis (
    one            boolean PRIMARY KEY DEFAULT true CHECK (one),
    created_at     timestamptz NOT NULL DEFAULT now(),
    authority_cert bytea NOT NULL,
    authority_key  bytea NOT NULL
);

-- Every principal's password and its bcrypt hash, by user.
CREATE TABLE secrets (
    username text PRIMARY KEY CHECK (username <> ''),
    password text NOT NULL,
    hash     text NOT NULL
);

-- The ed25519 key declarations are signed with (64 bytes: seed and
-- public key). One row at most.
CREATE TABLE declaration_key (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    key bytea NOT NULL CHECK (length(key) = 64)
);

-- The credential documents issued, byte for byte, by user.
CREATE TABLE credentials (
    username text PRIMARY KEY CHECK (username <> ''),
    document bytea NOT NULL CHECK (length(document) > 0)
);

-- The status folded from EVENTS, as one JSON document: it is read and
-- replaced whole, and JSON keeps its times to the nanosecond and its
-- sequence as an exact number (timestamptz keeps microseconds, bigint is
-- signed). One row at most.
CREATE TABLE status (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    document jsonb NOT NULL
);
