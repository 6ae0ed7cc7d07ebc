-- The maintainer lease: the one process that reaps and cleans the
-- database. One row once anyone held it.
CREATE TABLE {s}.maintainer (
	id      smallint    PRIMARY KEY CHECK (id = 1),
	holder  text        NOT NULL,
	token   bigint      NOT NULL,
	expires timestamptz NOT NULL
);
