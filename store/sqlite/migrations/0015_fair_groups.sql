-- Fairness groups: a message may name the tenant it is sent for, and is
-- placed in the claim order behind its group's last ready message. The
-- index finds that message, among the pending ones only.
ALTER TABLE leasehold_messages ADD COLUMN fair_group TEXT;
CREATE INDEX leasehold_fair_group ON leasehold_messages (queue, fair_group, visible_at) WHERE state = {pending} AND fair_group IS NOT NULL;
