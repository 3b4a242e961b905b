-- Distributing uno-audit's schema on Citus, with game_id as the distribution column.
--
-- Run once, on the coordinator, as the tables' owner, after the migrations (uno-audit serve applies them
-- at start, or `uno-audit project` for the read models) and before the service takes traffic:
--
--     psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/citus.sql
--
-- Every table of the schema is placed here, and tests/store/test_distributable.py fails if one is not,
-- or if a placed table's primary key or a unique constraint lacks its distribution column, or if a
-- foreign key joins distributed tables. The migration ledgers (schema_migrations, projection_migrations)
-- stay plain tables on the coordinator, where the migration runner uses them.

CREATE EXTENSION IF NOT EXISTS citus;

-- The tables keep their triggers (append-only, and the events' link check, which reads the game's
-- previous event and, for version 1, its catalogue row: rows of the same game, on the shard group the
-- trigger runs in, since the tables are co-located). Citus distributes tables with triggers only when
-- asked to.
SET citus.enable_unsafe_triggers = on;

-- A game's catalogue rows, stream and command ledger, on one shard group.
SELECT create_distributed_table('games', 'game_id');
SELECT create_distributed_table('game_secrets', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('seats', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('events', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('commands', 'game_id', colocate_with => 'games');

-- The per-game read models live with their game.
SELECT create_distributed_table('hands', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('tables', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('round_scores', 'game_id', colocate_with => 'games');
SELECT create_distributed_table('match_scores', 'game_id', colocate_with => 'games');

-- Totals across games, and the projectors' checkpoints and quarantine: small, read everywhere, written
-- by the projectors in their batch transactions.
SELECT create_reference_table('clients');  -- the client applications' keys: few, read on every creation
SELECT create_reference_table('standings');
SELECT create_reference_table('player_stats');
SELECT create_reference_table('projection_checkpoints');
SELECT create_reference_table('projection_quarantine');
