-- A command id names one command of one game: the ledger's key (game_id, command_id) is the whole rule,
-- so every unique key of the store now carries game_id (nothing left to distribute by another column on
-- Citus). What command_ids did — recognise a retried creation, which drew a new game id each time — the
-- application now does by deriving a new game's id from its creating command id: a retry reaches the
-- same game and finds its ledger row there. The claims are redundant with the ledger rows (same ids,
-- same games), so nothing is lost with the table.
DROP TABLE command_ids;
