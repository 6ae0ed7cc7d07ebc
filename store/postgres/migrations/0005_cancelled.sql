-- Cancelled messages, listed and counted by queue.
CREATE INDEX messages_cancelled ON {s}.messages (queue, id) WHERE state = {cancelled};
