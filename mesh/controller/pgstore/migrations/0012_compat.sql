-- What the running controller last saw of the compatibility broker's
-- clients (store.Compat). One row at most.
CREATE TABLE compat (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    document jsonb NOT NULL
);
