-- What the definitions need to know about a Citus deployment (docs/decisions/0009).

-- Whether Citus distributed p_table (by couple_id: sql/citus/distribute.sql). False on plain PostgreSQL.
CREATE OR REPLACE FUNCTION rbac.distributed(p_table regclass) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
DECLARE
    v_distributed boolean;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1 AND partmethod = ''h'')'
        INTO v_distributed USING p_table;
    RETURN v_distributed;
END $$;
