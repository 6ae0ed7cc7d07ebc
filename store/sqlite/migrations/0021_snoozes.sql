-- How often each message's handler snoozed it (a release that runs it
-- again later without counting the delivery), for the dashboard.
ALTER TABLE leasehold_messages ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
