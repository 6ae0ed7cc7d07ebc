-- How a message's last claim leased it: true when the claim gave each
-- message of its run a lease of its own (store.Claim's Independent), so
-- that a message going back brings back none of its key's later ones,
-- and those keep their leases. A constant default adds the column
-- without rewriting the table.
ALTER TABLE {s}.messages ADD COLUMN independent boolean NOT NULL DEFAULT false;
