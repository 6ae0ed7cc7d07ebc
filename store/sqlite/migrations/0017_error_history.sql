-- A message's error history: a JSON array of its attempts' errors, the
-- newest last (see the noteError statement).
ALTER TABLE leasehold_messages ADD COLUMN errors TEXT;
