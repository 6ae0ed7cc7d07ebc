-- Fairness groups: a message may name the tenant it is sent for, and is
-- placed in the claim order behind its group's last ready message. The
-- index finds that message, among the pending ones only.
ALTER TABLE {s}.messages ADD COLUMN fair_group text;
CREATE INDEX messages_fair_group ON {s}.messages (queue, fair_group, visible_at) WHERE state = {pending} AND fair_group IS NOT NULL;
