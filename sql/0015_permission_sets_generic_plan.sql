-- user_permission_sets is called with one to a thousand pairs. Left to choose, PostgreSQL planned its query
-- afresh on every call: a plan made for the arrays at hand always looks cheaper than the generic one, which
-- has to guess their length, and the planning cost more than running the query. The generic plan (index
-- lookups per pair) suits every length. With pgbench on one connection, calls a second went from about 4,400
-- to 10,800 for one pair, and from about 3,000 to 6,000 for six.
ALTER FUNCTION public.user_permission_sets(uuid[], uuid[]) SET plan_cache_mode = force_generic_plan;
