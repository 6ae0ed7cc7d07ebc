-- The maintainer lease: the one process that reaps and cleans the
-- database. One row once anyone held it; expires is
-- in Unix microseconds.
CREATE TABLE leasehold_maintainer (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	holder  TEXT    NOT NULL,
	token   INTEGER NOT NULL,
	expires INTEGER NOT NULL
);
