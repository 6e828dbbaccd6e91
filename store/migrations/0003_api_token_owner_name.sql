-- The owner's display name: owners are now stable identities (the OIDC
-- subject), which are not meant for people to read.
ALTER TABLE api_tokens ADD COLUMN owner_name TEXT NOT NULL DEFAULT '';
