-- What the definitions need to know about a Citus deployment (docs/decisions/0009).

-- Whether Citus distributed p_table (by couple_id: sql/citus/distribute.sql). False on plain PostgreSQL.
CREATE OR REPLACE FUNCTION rbac.distributed(p_table regclass) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
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

-- The node that holds p_couple's budget (every budget table is colocated), as the coordinator reaches it: the
-- services read a couple's budget there, where no coordinator relays the rows (docs/decisions/0012). No row
-- on plain PostgreSQL, or before the budget is distributed.
CREATE OR REPLACE FUNCTION rbac.budget_node(p_couple uuid, OUT host text, OUT port integer) RETURNS SETOF record
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF rbac.distributed('public.budget_revisions') THEN
        RETURN QUERY EXECUTE
            'SELECT n.nodename::text, n.nodeport FROM pg_catalog.pg_dist_placement p
             JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid
             WHERE p.shardid = pg_catalog.get_shard_id_for_distribution_column(''public.budget_revisions'', $1)
               AND n.isactive AND n.noderole = ''primary''
             ORDER BY p.placementid LIMIT 1'
            USING p_couple;
    END IF;
END $$;
