-- The builds the controller asked for and their outcomes
-- (controller.Build), by build id (wire.BuildID): one row per repository,
-- module and revision, its outcome written once.
CREATE TABLE builds (
    id       text PRIMARY KEY CHECK (id <> ''),
    document jsonb NOT NULL
);
