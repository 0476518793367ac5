-- Users go to the operator's log too. A user belongs to no couple (a couple's log records memberships, not
-- the people behind them), and before this nothing recorded who added a user or changed one.
CREATE TRIGGER users_audit AFTER INSERT OR UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('user');
