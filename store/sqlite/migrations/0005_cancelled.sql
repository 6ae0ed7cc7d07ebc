-- Cancelled messages, listed and counted by queue.
CREATE INDEX leasehold_cancelled ON leasehold_messages (queue, id) WHERE state = {cancelled};
