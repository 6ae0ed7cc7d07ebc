-- Listing finished messages page by page, which a dashboard does, must not
-- read a queue's whole history. These indexes hold finished messages
-- only, so each costs a completion (or a dead-lettering, or a cancel) one
-- more entry; claims, extensions and the live states' indexes are as they
-- were. The live states need no such index: their pages read only live
-- rows.
--
-- A queue's completed messages by id: messages_completed orders them by
-- finish time across all queues, for the cleaner, so without this index a
-- page of them is a walk of every completed row, or of the primary key
-- past every other queue's history.
CREATE INDEX messages_completed_queue ON {s}.messages (queue, id) WHERE state = {completed};
-- A key's finished messages by id (List with a key): completed, dead or
-- cancelled. Only messages with a key have entries. A key's live messages
-- are found through messages_key_head and messages_waiting.
CREATE INDEX messages_finished_key ON {s}.messages (queue, key, id)
	WHERE key IS NOT NULL AND state IN ({completed}, {dead}, {cancelled});
-- A kind's completed messages by id (List with a kind): without it, a
-- page of a rare kind walks the queue's completed messages until it finds
-- enough, and of a kind the queue never ran, all of them (or the planner
-- scans the table). Dead and cancelled messages of a kind are found
-- through their state's index: they are few, and a kind's completed
-- messages would bury them.
CREATE INDEX messages_completed_kind ON {s}.messages (queue, kind, id) WHERE kind IS NOT NULL AND state = {completed};
