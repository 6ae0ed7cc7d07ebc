-- The kind of job a message carries; NULL for none.
ALTER TABLE {s}.messages ADD COLUMN kind text;
