-- The ceiling of the fencing tokens that claims may hand out without a
-- commit that syncs: a claim commits without syncing the disk while its
-- tokens stay at or under it, and one that would go over raises it in a
-- commit that syncs; every store that opens the file moves the fence up
-- to it. Tokens lost with unsynced claims in a power failure are under
-- the ceiling that survived, so they are never handed out again (see
-- durability.go).
INSERT INTO leasehold_meta (name, value) SELECT 'fence_ceiling', value FROM leasehold_meta WHERE name = 'fence';
