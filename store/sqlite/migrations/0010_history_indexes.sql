-- Listing finished messages page by page, which a dashboard does, must not
-- read a queue's whole history. These indexes hold finished messages
-- only, so each costs a completion (or a dead-lettering, or a cancel) one
-- more entry, and the cleaner one more deletion; claims, extensions and
-- the live states' indexes are as they were. The live states need no such
-- index: their pages read only live rows.
--
-- A queue's completed messages by id: leasehold_completed orders them by
-- finish time across all queues, for the cleaner, so without this index a
-- page of them is a walk of every completed row.
CREATE INDEX leasehold_completed_queue ON leasehold_messages (queue, id) WHERE state = {completed};
-- A key's finished messages by id (List with a key): completed, dead or
-- cancelled. Only messages with a key have entries. A key's live messages
-- are found through leasehold_key_head and leasehold_waiting.
CREATE INDEX leasehold_finished_key ON leasehold_messages (queue, key, id)
	WHERE key IS NOT NULL AND state IN ({completed}, {dead}, {cancelled});
-- A kind's completed messages by id (List with a kind): without it, a
-- page of a rare kind walks the queue's completed messages until it finds
-- enough, and of a kind the queue never ran, all of them (a third of a
-- second for a million, measured). Dead and cancelled messages of a kind
-- are found through their state's index: they are few, and a kind's
-- completed messages would bury them.
CREATE INDEX leasehold_completed_kind ON leasehold_messages (queue, kind, id) WHERE kind IS NOT NULL AND state = {completed};
