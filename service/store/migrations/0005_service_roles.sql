-- The read models' writer, and no creating in the schema but by its owner. service/store/migrate.py
-- describes the three roles: uno_audit_app (0001), this one, and the login uno_audit_service that
-- `uno-audit migrate` makes a member of both. The service logs in as that restricted login; it no longer
-- takes a role with SET ROLE, which the login it was taken from could undo with RESET ROLE.

-- The projector's role: it reads the log it folds (and the games' tournaments); its write privileges,
-- on the read models only, are granted by projections/migrate.py, because a rebuild replaces those
-- tables and every migration of the read models must keep them. Cluster-wide, so created if missing, as
-- uno_audit_app is in 0001.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'uno_audit_projector') THEN
        CREATE ROLE uno_audit_projector NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO uno_audit_projector', current_schema());
    -- PostgreSQL before 15 lets every role create tables in the schema public; the audit's database
    -- gives that to no one but the schema's owner (a migrator that is not the owner gets a warning, and
    -- `uno-audit serve` then refuses a service login that may still create).
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
END
$$;
GRANT SELECT ON events, games, schema_migrations TO uno_audit_projector;
