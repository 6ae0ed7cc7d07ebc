-- Dead-letter queues: a message may name the queue it moves to when it
-- is dead-lettered, and a message moved there remembers the queue it
-- came from, so that it can be moved back.
ALTER TABLE {s}.messages ADD COLUMN dead_letter_queue text, ADD COLUMN dead_letter_source text;
