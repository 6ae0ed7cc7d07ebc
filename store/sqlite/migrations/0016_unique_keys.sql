-- Unique messages: an enqueue finds the messages of its unique key
-- through this index, whatever their state.
ALTER TABLE leasehold_messages ADD COLUMN unique_key TEXT;
CREATE INDEX leasehold_unique_key ON leasehold_messages (unique_key) WHERE unique_key IS NOT NULL;
