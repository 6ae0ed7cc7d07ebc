-- A message's priority: claims take the highest first.
ALTER TABLE leasehold_messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

-- Claims read a queue's pending messages in claim order: priority, then
-- visibility, then id.
DROP INDEX leasehold_ready;
CREATE INDEX leasehold_ready ON leasehold_messages (queue, priority DESC, visible_at, id) WHERE state = {pending};
