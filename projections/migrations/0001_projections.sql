-- The read models (projections) and the projector's checkpoints. Owned by the projections package and
-- applied by projections/migrate.py (ledger: projection_migrations), after the event store's own
-- migrations. Every table here is derived from the events and can be dropped and rebuilt from zero
-- (projections/rebuild.py), so none references the store's tables: a foreign key would only slow the
-- projector down and tie a rebuild's fresh tables to the catalogue.

-- Where each projection set stands in the gap-free global order (xid, position) of the events: the
-- cursor just after the last event applied. Written in the same transaction as the view rows, which is
-- what makes projecting exactly-once. `applied` counts events applied; `last_recorded_at` is the
-- recorded time of the last one (for the lag metric).
CREATE TABLE projection_checkpoints (
    projection_set   text PRIMARY KEY,
    xid              xid8 NOT NULL DEFAULT '0',
    position         bigint NOT NULL DEFAULT 0,
    applied          bigint NOT NULL DEFAULT 0,
    last_recorded_at timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Every seat's hand, as card tokens in the order the rules engine holds them.
CREATE TABLE hands (
    game_id text NOT NULL,
    seat    int NOT NULL,
    cards   text[] NOT NULL,
    PRIMARY KEY (game_id, seat)
);

-- The table as everyone sees it. draw_pile and discard_pile are card counts; top and colour are null
-- before the first card is turned; version is the game's stream version the row reflects (what a
-- client waits for to read its own write); status is created, playing, between-rounds or over.
CREATE TABLE tables (
    game_id      text PRIMARY KEY,
    variant      text NOT NULL,
    round        int NOT NULL,
    dealer       int,
    top          text,
    colour       text,
    direction    int NOT NULL,
    turn         int NOT NULL,
    awaiting     text NOT NULL,
    draw_pile    int NOT NULL,
    discard_pile int NOT NULL,
    version      int NOT NULL,
    status       text NOT NULL
);

-- One row per finished round: the winner's seat, the points scored and, in hands, what every seat held
-- at the end as a JSON array by seat (the winner's entry is empty).
CREATE TABLE round_scores (
    game_id text NOT NULL,
    round   int NOT NULL,
    winner  int NOT NULL,
    points  int NOT NULL,
    hands   jsonb NOT NULL,
    PRIMARY KEY (game_id, round)
);

-- The running match total of every seat.
CREATE TABLE match_scores (
    game_id text NOT NULL,
    seat    int NOT NULL,
    player  text NOT NULL,
    total   int NOT NULL,
    PRIMARY KEY (game_id, seat)
);

-- Per tournament and player (games outside a tournament are not listed here, only in player_stats):
-- games played, games won, rounds won, points scored in the rounds won, UNO penalties caught on others
-- (given) and suffered (taken), Wild Draw Four challenges won and lost.
CREATE TABLE standings (
    tournament_id       text NOT NULL,
    player              text NOT NULL,
    games               int NOT NULL,
    wins                int NOT NULL,
    rounds_won          int NOT NULL,
    points              bigint NOT NULL,
    uno_penalties_given int NOT NULL,
    uno_penalties_taken int NOT NULL,
    challenges_won      int NOT NULL,
    challenges_lost     int NOT NULL,
    PRIMARY KEY (tournament_id, player)
);

-- The same counters per player name across all games.
CREATE TABLE player_stats (
    player              text PRIMARY KEY,
    games               int NOT NULL,
    wins                int NOT NULL,
    rounds_won          int NOT NULL,
    points              bigint NOT NULL,
    uno_penalties_given int NOT NULL,
    uno_penalties_taken int NOT NULL,
    challenges_won      int NOT NULL,
    challenges_lost     int NOT NULL
);

-- The service's pooled connections (role uno_audit_app, created by the store's first migration, which
-- projections/migrate.py applies first) read the views; only the projector, connected as the login
-- user that owns these tables, writes them.
GRANT SELECT ON projection_checkpoints, hands, tables, round_scores, match_scores, standings, player_stats
    TO uno_audit_app;
GRANT SELECT ON projection_migrations TO uno_audit_app;
