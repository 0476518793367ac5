-- delete_user erases the deleted person from the operator's log: the entries of their user row and of their
-- identities. Found by the ids those entries hold, instead of reading every user's and identity's entry (one
-- at least for each user ever added), while the deletion holds the person's memberships.
CREATE INDEX operator_audit_log_people ON operator_audit_log
    USING gin ((ARRAY[before ->> 'id', after ->> 'id', before ->> 'user_id', after ->> 'user_id']))
    WHERE action ~ '^(user|identity)\.';
