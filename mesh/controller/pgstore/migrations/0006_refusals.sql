-- The CONTROL messages the controller refused: counts by kind and the
-- newest of them (controller.Refusals). One row at most.
CREATE TABLE refusals (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    document jsonb NOT NULL
);
