-- A message moved into a queue (a dead letter, or Store.Move) keeps its
-- id but takes its place in its key's line as a new message would: after
-- every message of its key already there. arrival holds that place, a
-- number drawn from the ids' sequence (sqlite_sequence) when it moved;
-- NULL for a message that never moved, whose place is its id. Enqueueing
-- writes nothing more.
ALTER TABLE leasehold_messages ADD COLUMN arrival INTEGER;
DROP INDEX leasehold_waiting;
CREATE INDEX leasehold_waiting ON leasehold_messages (queue, key, COALESCE(arrival, id)) WHERE state = {waiting};
