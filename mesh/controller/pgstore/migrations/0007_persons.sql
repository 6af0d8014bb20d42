-- The persons issued with mesh-controller person issue (controller.Person):
-- a person's user is composed from its row, its secret kept in secrets
-- like any principal's. A revoked person's row is deleted.
CREATE TABLE persons (
    name     text PRIMARY KEY CHECK (name <> ''),
    document jsonb NOT NULL
);
