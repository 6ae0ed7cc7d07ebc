-- How often each message's handler snoozed it (a release that runs it
-- again later without counting the delivery), for the dashboard.
ALTER TABLE {s}.messages ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
