-- The audit trail's lookups. Disputes and their rulings are events of their game's stream (types
-- DisputeFiled and DisputeRuled, see service/audit/entries.py); this partial index finds them without
-- scanning the log. The command ledger's per-game index lets the verifier compare the last version the
-- ledger says was written with the stream's end (events deleted from the end leave no hole).
CREATE INDEX events_disputes ON events (game_id, version) WHERE type IN ('DisputeFiled', 'DisputeRuled');
CREATE INDEX commands_game_last_version ON commands (game_id, last_version);
