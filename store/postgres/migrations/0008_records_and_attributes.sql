-- A queue's record (Store.CreateQueue) shares the queue's row with its
-- pause, since both are the queue's settings: created_at is NULL while the
-- queue has no record, as in a row that only Pause made, and Queues lists
-- the rows that are paused or recorded. attributes is the record's JSON
-- object of strings, kept as text. DeleteQueue deletes the row, record and
-- pause together; PurgeQueue leaves it.
ALTER TABLE {s}.queues
	ADD COLUMN attributes text,
	ADD COLUMN created_at timestamptz,
	ADD COLUMN updated_at timestamptz;

-- A message's attributes, kept beside its payload as given; NULL for
-- none. first_claimed_at is when its first claim took it: NULL until
-- then, and for a message claimed only before this migration, until its
-- next claim.
ALTER TABLE {s}.messages
	ADD COLUMN attributes bytea,
	ADD COLUMN first_claimed_at timestamptz;
