-- The kind of job a message carries; NULL for none.
ALTER TABLE leasehold_messages ADD COLUMN kind TEXT;
