-- What the controller last heard of the nodes' heartbeats, and whether
-- its own bus connection was up (controller.Liveness). One row at most.
CREATE TABLE liveness (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    document jsonb NOT NULL
);
