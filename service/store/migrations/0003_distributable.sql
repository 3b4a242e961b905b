-- Ready for a distributed PostgreSQL (Citus) with game_id as the distribution column: every primary key
-- and unique constraint of a game's tables includes game_id, and no foreign key joins two of them. The
-- distribution itself is deploy/citus.sql; tests/store/test_distributable.py checks the live schema.

-- The command ledger, per game: its key includes game_id, so a command's ledger row lives with its
-- game's events. A command id must still name one command of one game (a retried creation draws a new
-- game id and must be recognised by its command id alone), so the id is claimed in command_ids, keyed
-- by the id alone: on Citus that table is distributed by command_id, the one table not keyed by game.
CREATE TABLE command_ids (
    command_id text PRIMARY KEY,
    game_id    text NOT NULL
);
INSERT INTO command_ids (command_id, game_id) SELECT command_id, game_id FROM commands;
ALTER TABLE commands DROP CONSTRAINT commands_pkey;
ALTER TABLE commands ADD CONSTRAINT commands_pkey PRIMARY KEY (game_id, command_id);
CREATE TRIGGER command_ids_immutable_rows BEFORE UPDATE OR DELETE ON command_ids
    FOR EACH ROW EXECUTE FUNCTION uno_audit_reject_change();
CREATE TRIGGER command_ids_immutable_truncate BEFORE TRUNCATE ON command_ids
    FOR EACH STATEMENT EXECUTE FUNCTION uno_audit_reject_change();
GRANT SELECT, INSERT ON command_ids TO uno_audit_app;

-- The events' key is the stream position (game_id, version); the global position stays unique by its
-- identity sequence, indexed for the lag and checkpoint lookups. (Recreating the key rebuilds the
-- (game_id, version) index once: an existing database pays for it at this migration.)
CREATE INDEX events_position ON events (position);
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events DROP CONSTRAINT events_stream_version;
ALTER TABLE events ADD CONSTRAINT events_stream_version PRIMARY KEY (game_id, version);

-- No foreign keys between distributed tables. The store writes seats, secrets, ledger rows and a game's
-- first events only together with its games row (one statement); what the foreign key on events also
-- refused, a stream started by hand for a game that is not catalogued, the insert trigger now refuses.
ALTER TABLE game_secrets DROP CONSTRAINT game_secrets_game_id_fkey;
ALTER TABLE seats DROP CONSTRAINT seats_game_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_game_id_fkey;
ALTER TABLE commands DROP CONSTRAINT commands_game_id_fkey;

-- A stream starts only for a catalogued game: version 1 needs the game's catalogue row. (Triggers fire
-- in name order: this one before events_link checks the chain.)
CREATE FUNCTION uno_audit_events_catalogued() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM games g WHERE g.game_id = NEW.game_id) THEN
        RAISE EXCEPTION 'game %: no such game in the catalogue', NEW.game_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'events_game';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER events_catalogued BEFORE INSERT ON events
    FOR EACH ROW WHEN (NEW.version = 1) EXECUTE FUNCTION uno_audit_events_catalogued();
