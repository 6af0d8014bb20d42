-- The record of the last cutover begun, the mesh's move from one bus to
-- another (store.Cutover), replaced whole at each step. One row at most.
CREATE TABLE cutover (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    document jsonb NOT NULL
);
