/*
 * Webhooks' SQL (issue 14): the outbox seam every change transaction uses, and the REST queries and the
 * delivery workers' statements (ids BERTH_Q_WH_* in sql/statements.h, run with berth_db_api).
 */
#ifndef BERTH_SQL_WEBHOOK_H
#define BERTH_SQL_WEBHOOK_H

#include "sql/db.h"

/**
 * Queue a webhook event inside the caller's open transaction, so it commits or rolls back with the change it
 * announces (the outbox). `type` is Harbor's event type (PUSH_ARTIFACT, QUOTA_EXCEED, TAG_RETENTION, ...);
 * `project` NULL means the project of `repo`; repo, digest, tag and `extra_json` (a JSON object merged into the
 * payload's event_data) may be NULL. The operator is the connection's actor (berth_db_set_actor). Writes nothing
 * when no enabled policy of the project listens to `type`. 0, or a negative code with err set (then roll back).
 * The same in SQL: SELECT berth_webhook_enqueue(project, type, operator, repo, digest, tag, extra::jsonb).
 */
int berth_db_webhook_enqueue(berth_dbconn_t *c, const char *project, const char *type, const char *repo, const char *digest,
                             const char *tag, const char *extra_json, berth_err_t *err);

#endif
