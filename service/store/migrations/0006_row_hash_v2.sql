-- Row hash version 2: an event's metadata (command id, request hash, actor, command) and its time are
-- hashed with it from now on (service/store/model.py: event_hash). Rows stored before keep version 1 and
-- verify exactly as they always did: nothing already stored is rewritten, and the new column's constant
-- default fills them without touching a row (so no trigger runs).
ALTER TABLE events ADD COLUMN hash_version smallint NOT NULL DEFAULT 1
    CONSTRAINT events_hash_version_known CHECK (hash_version IN (1, 2));

-- The link trigger again, with two changes. A version-2 row keeps the recorded_at it was hashed with
-- (the writer's clock, which the hash covers); a version-1 row is still stamped with now(). And a stream
-- never goes back to version 1 after a version-2 row, so no writer can leave a later row's metadata
-- outside the chain.
CREATE OR REPLACE FUNCTION uno_audit_events_link() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    previous_hash    bytea;
    previous_xid     xid8;
    previous_version smallint;
BEGIN
    NEW.xid := pg_current_xact_id();
    IF NEW.hash_version = 1 THEN
        NEW.recorded_at := now();
    END IF;
    IF NEW.version = 1 THEN
        previous_hash := decode(repeat('00', 32), 'hex');  -- GENESIS_HASH
    ELSE
        SELECT e.hash, e.xid, e.hash_version INTO previous_hash, previous_xid, previous_version
          FROM events e
         WHERE e.game_id = NEW.game_id AND e.version = NEW.version - 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'game %: version % does not follow a stored version %',
                            NEW.game_id, NEW.version, NEW.version - 1
                USING ERRCODE = 'check_violation', CONSTRAINT = 'events_contiguous';
        END IF;
        IF previous_xid > NEW.xid THEN
            RAISE EXCEPTION 'game %: version % was committed by a younger transaction', NEW.game_id,
                            NEW.version - 1
                USING ERRCODE = 'check_violation', CONSTRAINT = 'events_xid_order';
        END IF;
        IF NEW.hash_version < previous_version THEN
            RAISE EXCEPTION 'game %: version % has row hash version %, below its predecessor''s %',
                            NEW.game_id, NEW.version, NEW.hash_version, previous_version
                USING ERRCODE = 'check_violation', CONSTRAINT = 'events_hash_version_order';
        END IF;
    END IF;
    IF NEW.prev_hash <> previous_hash THEN
        RAISE EXCEPTION 'game %: prev_hash of version % is not the hash of version %', NEW.game_id,
                        NEW.version, NEW.version - 1
            USING ERRCODE = 'check_violation', CONSTRAINT = 'events_hash_chain';
    END IF;
    RETURN NEW;
END
$$;

-- The events that carry a command id: a new command is written only if none does (so a command whose
-- ledger row is gone is never carried out twice), and a retry's ledger row is checked against them
-- (service/store/streams.py: the ledger and the events must agree, or the command is refused).
CREATE INDEX events_command ON events (game_id, (metadata->>'command_id'));
