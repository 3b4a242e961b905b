-- Read models that one bad input cannot stop (projections/quarantine.py).
--
-- 1. Keys that fit any stored value. A btree index entry holds at most about 2,700 bytes, so a primary
-- key over free text (a player's name, a tournament id) made one long name fail every batch of the
-- projector and every rebuild. The aggregates are now keyed by the SHA-256 of that text (32 bytes,
-- computed by projections/writer.py as sha256 of the UTF-8 bytes, exactly what convert_to gives here);
-- the text stays in its column for the readers. Per-game tables keep game_id in their keys: the event
-- store indexes game_id itself (games' primary key, events' (game_id, version)), so any game that could
-- be stored has an id that fits.
ALTER TABLE player_stats ADD COLUMN player_key bytea;
UPDATE player_stats SET player_key = sha256(convert_to(player, 'UTF8'));
ALTER TABLE player_stats ALTER COLUMN player_key SET NOT NULL;
ALTER TABLE player_stats DROP CONSTRAINT player_stats_pkey;
ALTER TABLE player_stats ADD PRIMARY KEY (player_key);

ALTER TABLE standings ADD COLUMN tournament_key bytea, ADD COLUMN player_key bytea;
UPDATE standings SET tournament_key = sha256(convert_to(tournament_id, 'UTF8')),
                     player_key = sha256(convert_to(player, 'UTF8'));
ALTER TABLE standings ALTER COLUMN tournament_key SET NOT NULL, ALTER COLUMN player_key SET NOT NULL;
ALTER TABLE standings DROP CONSTRAINT standings_pkey;
ALTER TABLE standings ADD PRIMARY KEY (tournament_key, player_key);

-- 2. Games set aside. A game whose events cannot be folded (a payload that does not decode, an event
-- the rules engine cannot apply, a hole in its versions, rows the database refuses) is recorded here in
-- the same transaction as the checkpoint that moves past its skipped events; its views reflect exactly
-- its events below `version`. `position` is that event's global position, `cause` one word (decode,
-- fold, stream, write), `reason` the error. A rebuild of all views replaces a set's rows here.
CREATE TABLE projection_quarantine (
    projection_set text NOT NULL,
    game_id        text NOT NULL,
    version        int NOT NULL,
    position       bigint NOT NULL,
    cause          text NOT NULL CHECK (cause IN ('decode', 'fold', 'stream', 'write')),
    reason         text NOT NULL CHECK (length(reason) <= 1000),
    quarantined_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection_set, game_id)
);

-- 3. A projector that cannot make progress for a reason tied to no game (the database away, a bug)
-- says so here: its last error (bounded like a reason) and since when. The next batch that commits
-- clears both.
ALTER TABLE projection_checkpoints
    ADD COLUMN failing text CHECK (length(failing) <= 1000),
    ADD COLUMN failing_since timestamptz;

GRANT SELECT ON projection_quarantine TO uno_audit_app;
