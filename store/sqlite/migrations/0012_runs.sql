-- A key's run: a claim may take several messages of one key at once
-- (store.Claim's Runs), so more than one of them may be processing.
-- leasehold_key_head keeps finding a key's unfinished messages, but no
-- longer holds one only; the rules in storecore keep at most one of them
-- pending.
DROP INDEX leasehold_key_head;
CREATE INDEX leasehold_key_head ON leasehold_messages (queue, key) WHERE state IN ({pending}, {processing}) AND key IS NOT NULL;
