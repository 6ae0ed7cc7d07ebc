-- Deleting completed messages takes back their count once per statement
-- (see Prune and DeleteQueue), not once per row: the cleaner deletes
-- thousands at a time.
DROP TRIGGER leasehold_completed_delete;
