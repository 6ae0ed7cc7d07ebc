-- Secrets that every process of the database shares, by name: the keys a
-- server signs receipt handles and sessions with. A secret is made once,
-- by the first process that asks, and never changes.
CREATE TABLE leasehold_server_secrets (
	name   TEXT PRIMARY KEY,
	secret BLOB NOT NULL
);
-- One row that a readiness check rewrites, to prove that the database
-- takes writes.
CREATE TABLE leasehold_write_check (
	id     INTEGER PRIMARY KEY CHECK (id = 1),
	writes INTEGER NOT NULL
);
