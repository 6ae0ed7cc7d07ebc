-- How a message's last claim leased it: 1 when the claim gave each
-- message of its run a lease of its own (store.Claim's Independent), so
-- that a message going back brings back none of its key's later ones,
-- and those keep their leases.
ALTER TABLE leasehold_messages ADD COLUMN independent INTEGER NOT NULL DEFAULT 0;
