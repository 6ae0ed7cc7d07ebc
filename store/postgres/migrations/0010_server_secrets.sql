-- Secrets that every process of the database shares, by name: the keys a
-- server signs receipt handles and sessions with. A secret is made once,
-- by the first process that asks, and never changes.
CREATE TABLE {s}.server_secrets (
	name   text  PRIMARY KEY,
	secret bytea NOT NULL
);
-- One row that a readiness check rewrites, to prove that the database
-- takes writes.
CREATE TABLE {s}.write_check (
	id     smallint PRIMARY KEY CHECK (id = 1),
	writes bigint   NOT NULL
);
