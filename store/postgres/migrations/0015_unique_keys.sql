-- Unique messages: an enqueue finds the messages of its unique key
-- through this index, whatever their state.
ALTER TABLE {s}.messages ADD COLUMN unique_key text;
CREATE INDEX messages_unique_key ON {s}.messages (unique_key) WHERE unique_key IS NOT NULL;
