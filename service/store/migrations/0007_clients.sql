-- Client applications: an operator issues each a key (`uno-audit clients add NAME`); only its SHA-256 is
-- kept. A revoked client keeps its row (its games name it), with the time it was revoked. The service
-- reads this table; only the owner's login (the CLI) writes it.
CREATE TABLE clients (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    key_sha256 bytea NOT NULL UNIQUE CHECK (octet_length(key_sha256) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
GRANT SELECT ON clients TO uno_audit_app;

-- The client that created each game ('' for an anonymous caller, 'admin' for the adjudicator), also in
-- the creation's hashed metadata ("client"), which the verifier compares it with. The quotas count a
-- client's games created in the last minute and those still in progress: by client and time, and the
-- ended ones by the partial index on GameEnded.
ALTER TABLE games ADD COLUMN client text NOT NULL DEFAULT '';
CREATE INDEX games_client_created ON games (client, created_at);
CREATE INDEX events_game_ended ON events (game_id) WHERE type = 'GameEnded';
