#ifndef RBAC_CLIBPQ_SHIM_H
#define RBAC_CLIBPQ_SHIM_H

#include <libpq-fe.h>
#include <postgres_ext.h>
#include <poll.h>

/* PG_DIAG_* are character-literal macros, which Swift does not import. */
static const int rbac_PG_DIAG_SEVERITY = PG_DIAG_SEVERITY;
static const int rbac_PG_DIAG_SQLSTATE = PG_DIAG_SQLSTATE;
static const int rbac_PG_DIAG_MESSAGE_PRIMARY = PG_DIAG_MESSAGE_PRIMARY;
static const int rbac_PG_DIAG_MESSAGE_DETAIL = PG_DIAG_MESSAGE_DETAIL;
static const int rbac_PG_DIAG_MESSAGE_HINT = PG_DIAG_MESSAGE_HINT;
static const int rbac_PG_DIAG_SCHEMA_NAME = PG_DIAG_SCHEMA_NAME;
static const int rbac_PG_DIAG_TABLE_NAME = PG_DIAG_TABLE_NAME;
static const int rbac_PG_DIAG_COLUMN_NAME = PG_DIAG_COLUMN_NAME;
static const int rbac_PG_DIAG_CONSTRAINT_NAME = PG_DIAG_CONSTRAINT_NAME;

#endif
