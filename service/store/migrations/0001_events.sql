-- The event store: one append-only, hash-chained stream per game, plus the game catalogue, the secret
-- dealing seeds, the hashed seat tokens and the command ledger that makes commands idempotent.
-- Applied once, in its own transaction, by service/store/migrate.py (see there for the ordering rules).
-- service/store/store.py documents how each table is used; this file says what the database enforces.

-- The service's role. Roles are cluster-wide while this migration runs once per database, and several
-- databases (one per test) may migrate at the same moment: create it only if missing, and treat losing
-- the race to a concurrent creator as success.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'uno_audit_app') THEN
        CREATE ROLE uno_audit_app NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;
END
$$;

CREATE TABLE games (
    game_id       text PRIMARY KEY,
    variant       text NOT NULL,
    players       jsonb NOT NULL,
    tournament_id text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now()
);
-- list_games(tournament_id=...) pages through one tournament by game id.
CREATE INDEX games_tournament_game ON games (tournament_id, game_id);

-- The secret dealing seed. Never part of an event (only its SHA-256 is, until the game's end).
CREATE TABLE game_secrets (
    game_id text PRIMARY KEY REFERENCES games,
    seed    bytea
);

-- One row per seat: the SHA-256 of the seat's secret token (the token itself is never stored).
CREATE TABLE seats (
    game_id      text NOT NULL REFERENCES games,
    seat         int NOT NULL CHECK (seat >= 0),
    token_sha256 bytea NOT NULL,
    PRIMARY KEY (game_id, seat)
);

CREATE TABLE events (
    position    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    game_id     text NOT NULL REFERENCES games,
    version     int NOT NULL CHECK (version >= 1),
    type        text NOT NULL,
    payload     jsonb NOT NULL,
    metadata    jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    prev_hash   bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash        bytea NOT NULL CHECK (octet_length(hash) = 32),
    CONSTRAINT events_stream_version UNIQUE (game_id, version)
);
-- read_all: the global order (xid, position), read below the snapshot's xmin.
CREATE INDEX events_xid_position ON events (xid, position);

-- The idempotency ledger: a command id names one request against one game, and the versions it wrote.
CREATE TABLE commands (
    command_id     text PRIMARY KEY,
    game_id        text NOT NULL REFERENCES games,
    request_sha256 bytea NOT NULL,
    first_version  int NOT NULL,
    last_version   int NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (1 <= first_version AND first_version <= last_version)
);

-- Immutability. Rejects every changed or deleted row and every TRUNCATE, whoever asks (a superuser too;
-- only an explicit ALTER TABLE ... DISABLE TRIGGER gets past it, and the verifier's hash chain catches
-- what is changed that way).
CREATE FUNCTION uno_audit_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation',
              HINT = 'The audit log is immutable; record a correction by appending new events.';
END
$$;

CREATE TRIGGER events_immutable_rows BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION uno_audit_reject_change();
CREATE TRIGGER events_immutable_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION uno_audit_reject_change();
CREATE TRIGGER commands_immutable_rows BEFORE UPDATE OR DELETE ON commands
    FOR EACH ROW EXECUTE FUNCTION uno_audit_reject_change();
CREATE TRIGGER commands_immutable_truncate BEFORE TRUNCATE ON commands
    FOR EACH STATEMENT EXECUTE FUNCTION uno_audit_reject_change();

-- Every inserted event must follow the stream's previous one: version n needs a committed version n-1
-- (so a stream has no holes), prev_hash must be that event's hash (so a stale or wrong cached hash
-- cannot fork the chain), and the writing transaction must be younger than the previous event's (so
-- the global order by (xid, position) keeps each stream in version order). xid and recorded_at are
-- set here, not taken from the client, because read_all's gap-free order depends on xid being true.
CREATE FUNCTION uno_audit_events_link() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    previous_hash bytea;
    previous_xid  xid8;
BEGIN
    NEW.xid := pg_current_xact_id();
    NEW.recorded_at := now();
    IF NEW.version = 1 THEN
        previous_hash := decode(repeat('00', 32), 'hex');  -- GENESIS_HASH
    ELSE
        SELECT e.hash, e.xid INTO previous_hash, previous_xid
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
    END IF;
    IF NEW.prev_hash <> previous_hash THEN
        RAISE EXCEPTION 'game %: prev_hash of version % is not the hash of version %', NEW.game_id,
                        NEW.version, NEW.version - 1
            USING ERRCODE = 'check_violation', CONSTRAINT = 'events_hash_chain';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER events_link BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION uno_audit_events_link();

-- The service's privileges: read and append, nothing else. The pool's connections SET ROLE to it, so
-- even without the triggers the running service could not change or delete a row.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO uno_audit_app', current_schema());
END
$$;
GRANT SELECT, INSERT ON games, game_secrets, seats, events, commands TO uno_audit_app;
GRANT USAGE ON SEQUENCE events_position_seq TO uno_audit_app;
GRANT SELECT ON schema_migrations TO uno_audit_app;
