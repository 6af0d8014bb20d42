-- The foundation seats held by servers adopted in place (mesh-controller
-- adopt, store.Seat): one row per seat, its document carrying what the
-- server was raised with.
CREATE TABLE seats (
    name     text PRIMARY KEY CHECK (name <> ''),
    document jsonb NOT NULL
);
