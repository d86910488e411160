/*
 * Webhooks' SQL: policies, executions and tasks for the REST API (registry/api/webhook.c), the outbox insert
 * for change transactions, and the delivery workers' fan-out, claim and result (webhook/). PostgreSQL builds
 * both payload formats (Harbor's "Default" and CloudEvents 1.0 structured JSON), so C only sends bytes.
 */
#include "sql/webhook.h"

#include <stdlib.h>

#include "sql/db_internal.h"
#include "sql/page.h"

/* A policy as Harbor shows it; auth headers only as "*****" (they are credentials, sealed at rest) */
#define POL_JSON                                                                                                                   \
    "json_build_object('id', w.id, 'name', w.name, 'description', w.description, 'project_id', w.project_id, 'enabled', "          \
    "w.enabled, 'event_types', to_json(w.event_types), 'targets', (SELECT coalesce(json_agg(json_build_object('type', "            \
    "t->>'type', 'address', t->>'address', 'auth_header', CASE WHEN t ? 'auth_sealed' THEN '*****' ELSE '' END, "                  \
    "'skip_cert_verify', coalesce((t->>'skip_cert_verify')::bool, false), 'payload_format', t->>'payload_format') ORDER BY o), "   \
    "'[]') FROM jsonb_array_elements(w.targets) WITH ORDINALITY a(t, o)), 'ca_file', w.ca_file, 'creator', w.creator, "            \
    "'creation_time', w.created_at, 'update_time', w.updated_at)"

/* Harbor's Execution: one event delivered by one policy; its status summarises the tasks (one per target) */
#define EXEC_JSON                                                                                                                  \
    "json_build_object('id', x.id, 'vendor_type', 'WEBHOOK', 'vendor_id', x.policy_id, 'trigger', 'EVENT', 'status', CASE WHEN "   \
    "bool_or(k.status IN ('Pending', 'Running')) THEN 'Running' WHEN bool_or(k.status = 'Error') THEN 'Error' ELSE 'Success' "     \
    "END, 'metrics', json_build_object('task_count', count(k.id), 'success_task_count', count(k.id) FILTER (WHERE k.status = "     \
    "'Success'), 'error_task_count', count(k.id) FILTER (WHERE k.status = 'Error'), 'pending_task_count', count(k.id) FILTER "     \
    "(WHERE k.status = 'Pending'), 'running_task_count', count(k.id) FILTER (WHERE k.status = 'Running')), 'extra_attrs', "        \
    "json_build_object('event_type', e.type, 'event_id', e.event_id, 'repository', e.repo, 'digest', e.digest, 'tag', e.tag, "     \
    "'operator', e.actor), 'start_time', x.created_at, 'end_time', CASE WHEN bool_and(k.status IN ('Success', 'Error')) THEN "     \
    "max(k.end_time) END)"

#define TASK_JSON                                                                                                                  \
    "json_build_object('id', k.id, 'execution_id', k.execution_id, 'status', k.status, 'status_message', CASE WHEN "               \
    "k.status_code IS NULL THEN '' ELSE 'HTTP ' || k.status_code END, 'run_count', k.attempts, 'extra_attrs', "                    \
    "json_build_object('address', k.targets->k.target->>'address', 'status_code', k.status_code, 'next_attempt', CASE WHEN "       \
    "k.status = 'Pending' THEN k.next_at END), 'creation_time', k.created_at, 'start_time', k.start_time, 'update_time', "         \
    "k.update_time, 'end_time', k.end_time)"

/* Harbor's event_data: the artifact and its repository, plus what the emitter adds (quota, retention, scans).
 * $2 of the claim is the registry's host for resource_url. */
#define EVENT_DATA                                                                                                                 \
    "(jsonb_strip_nulls(jsonb_build_object('resources', CASE WHEN e.digest IS NOT NULL OR e.tag IS NOT NULL THEN "                 \
    "jsonb_build_array(jsonb_build_object('digest', e.digest, 'tag', e.tag, 'resource_url', $2::text || '/' || e.repo || CASE "    \
    "WHEN e.tag IS NOT NULL THEN ':' || e.tag ELSE '@' || e.digest END)) END, 'repository', CASE WHEN e.repo IS NOT NULL THEN "    \
    "jsonb_build_object('name', substr(e.repo, length(p.name) + 2), 'namespace', p.name, 'repo_full_name', e.repo, "               \
    "'repo_type', CASE WHEN p.public THEN 'public' ELSE 'private' END) END)) || coalesce(e.extra, '{}'::jsonb))"

/* CloudEvents types: Harbor's names where Harbor has the event, berth.* for Berth's own */
#define CE_TYPE                                                                                                                    \
    "CASE e.type WHEN 'PUSH_ARTIFACT' THEN 'harbor.artifact.pushed' WHEN 'PULL_ARTIFACT' THEN 'harbor.artifact.pulled' WHEN "      \
    "'DELETE_ARTIFACT' THEN 'harbor.artifact.deleted' WHEN 'QUOTA_EXCEED' THEN 'harbor.quota.exceeded' WHEN 'QUOTA_WARNING' "      \
    "THEN 'harbor.quota.warned' WHEN 'TAG_RETENTION' THEN 'harbor.tag_retention.finished' WHEN 'REPLICATION' THEN "                \
    "'harbor.replication.status.changed' WHEN 'ISA_SCAN_COMPLETED' THEN 'berth.isa_scan.completed' ELSE 'berth.' || "              \
    "lower(e.type) END"

#define BODY                                                                                                                       \
    "CASE WHEN w.targets->k.target->>'payload_format' = 'CloudEvents' THEN jsonb_build_object('specversion', '1.0', 'id', "        \
    "e.event_id::text, 'source', '/projects/' || p.id || '/webhook/policies/' || w.id, 'type', " CE_TYPE ", "                      \
    "'datacontenttype', 'application/json', 'time', to_char(e.occur_at AT TIME ZONE 'UTC', "                                       \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'operator', e.actor, 'data', " EVENT_DATA ") ELSE jsonb_build_object('type', e.type, "  \
    "'occur_at', floor(extract(epoch FROM e.occur_at))::bigint, 'operator', e.actor, 'event_data', " EVENT_DATA ") END::text"

/* a project's policy $2 (with $1 the project id) */
#define OWN_POLICY "w.project_id = $1::bigint AND w.id = $2::bigint"

const berth_db__stmt_t berth_db__webhook_stmts[BERTH_SQL__COUNT] = {
    BERTH_DB__STMT(BERTH_SQL_WEBHOOK_ENQUEUE, "SELECT berth_webhook_enqueue($1, $2, $3, $4, $5, $6, $7::jsonb)", 7),
    /* ---- policies: $1 project id ---- */
    BERTH_DB__STMT(BERTH_Q_WH_POL_LIST,
                   "WITH f AS (SELECT * FROM webhook_policies w WHERE w.project_id = $1::bigint) " PAGE(
                       POL_JSON, "w",
                       SORT_BY("$4", "id", "id") SORT_BY("$4", "name", "name") SORT_BY("$4", "creation_time", "created_at")
                           SORT_BY("$4", "update_time", "updated_at") "id",
                       "$2", "$3"),
                   4),
    BERTH_DB__STMT(BERTH_Q_WH_POL_GET, "SELECT " POL_JSON "::text FROM webhook_policies w WHERE " OWN_POLICY, 2),
    /* $2 name, $3 description, $4 enabled, $5 event types (JSON array), $6 targets (JSON), $7 sealed secret hex,
     * $8 CA file, $9 creator */
    BERTH_DB__STMT(BERTH_Q_WH_POL_CREATE,
                   "INSERT INTO webhook_policies (project_id, name, description, enabled, event_types, targets, secret, ca_file, "
                   "creator) VALUES ($1::bigint, $2::text, coalesce($3::text, ''), coalesce($4::bool, true), ARRAY(SELECT "
                   "jsonb_array_elements_text($5::jsonb)), $6::jsonb, decode($7::text, 'hex'), coalesce($8::text, ''), $9::text) "
                   "RETURNING json_build_object('id', id)::text",
                   9),
    /* NULL keeps a value; a target with "keep_auth" keeps the sealed auth header of the target at the same place if
     * that target's address is unchanged (a header is never sent to an address it was not given for) */
    BERTH_DB__STMT(
        BERTH_Q_WH_POL_UPDATE,
        "UPDATE webhook_policies w SET name = coalesce($3::text, w.name), description = coalesce($4::text, "
        "w.description), enabled = coalesce($5::bool, w.enabled), event_types = CASE WHEN $6::jsonb IS NULL THEN "
        "w.event_types ELSE ARRAY(SELECT jsonb_array_elements_text($6::jsonb)) END, targets = coalesce((SELECT jsonb_agg(CASE "
        "WHEN t ? 'keep_auth' THEN (t - 'keep_auth') || jsonb_strip_nulls(jsonb_build_object('auth_sealed', CASE WHEN "
        "w.targets->(o::int - 1)->>'address' = t->>'address' THEN w.targets->(o::int - 1)->'auth_sealed' END)) ELSE t END ORDER BY o) FROM jsonb_array_elements($7::jsonb) WITH "
        "ORDINALITY a(t, o)), w.targets), ca_file = coalesce($8::text, w.ca_file), updated_at = now() WHERE " OWN_POLICY,
        8),
    BERTH_DB__STMT(BERTH_Q_WH_POL_DELETE, "DELETE FROM webhook_policies w WHERE " OWN_POLICY " RETURNING to_json(w.name)::text", 2),
    /* ---- executions and tasks: $1 project id, $2 policy id ---- */
    BERTH_DB__STMT(BERTH_Q_WH_EXEC_LIST,
                   "WITH f AS (SELECT x.* FROM webhook_executions x JOIN webhook_policies w ON w.id = x.policy_id WHERE " OWN_POLICY
                   ") SELECT coalesce((SELECT json_agg(j ORDER BY id DESC) FROM (SELECT x.id, " EXEC_JSON " AS j FROM (SELECT * "
                   "FROM f ORDER BY id DESC LIMIT $3::bigint OFFSET $4::bigint) x JOIN webhook_events e ON e.id = x.event_id "
                   "LEFT JOIN webhook_tasks k ON k.execution_id = x.id GROUP BY x.id, x.policy_id, x.created_at, e.id) y), "
                   "'[]')::text, (SELECT count(*) FROM f)",
                   4),
    /* $3 execution id, $4 limit, $5 offset */
    BERTH_DB__STMT(BERTH_Q_WH_TASK_LIST,
                   "WITH f AS (SELECT k.*, w.targets FROM webhook_tasks k JOIN webhook_executions x ON x.id = k.execution_id JOIN "
                   "webhook_policies w ON w.id = x.policy_id WHERE " OWN_POLICY " AND x.id = $3::bigint) SELECT "
                   "coalesce((SELECT json_agg(" TASK_JSON " ORDER BY k.id) FROM (SELECT * FROM f ORDER BY id LIMIT $4::bigint "
                   "OFFSET $5::bigint) k), '[]')::text, (SELECT count(*) FROM f)",
                   5),
    /* $3 execution id, $4 task id: the attempts' log as a JSON string */
    BERTH_DB__STMT(BERTH_Q_WH_TASK_LOG,
                   "SELECT to_json(k.log)::text FROM webhook_tasks k JOIN webhook_executions x ON x.id = k.execution_id JOIN "
                   "webhook_policies w ON w.id = x.policy_id WHERE " OWN_POLICY " AND x.id = $3::bigint AND k.id = $4::bigint",
                   4),
    /* $3 execution id: deliver a finished execution again (same event id: receivers see a repeat) */
    BERTH_DB__STMT(BERTH_Q_WH_EXEC_RETRY,
                   "UPDATE webhook_tasks k SET status = 'Pending', attempts = 0, next_at = now(), end_time = NULL, update_time = "
                   "now(), log = k.log || 'redelivery requested by ' || $4::text || E'\\n' FROM webhook_executions x, "
                   "webhook_policies w WHERE k.execution_id = x.id AND w.id = x.policy_id AND " OWN_POLICY " AND x.id = $3::bigint "
                   "AND k.status IN ('Success', 'Error')",
                   4),
    /* ---- delivery (webhook/deliver.c) ---- */
    /* queued events become executions (one per enabled policy wanting the type) and tasks (one per target) */
    BERTH_DB__STMT(
        BERTH_Q_WH_DISPATCH,
        "WITH ev AS (SELECT id, project_id, type FROM webhook_events WHERE NOT dispatched ORDER BY id LIMIT $1::int FOR "
        "UPDATE SKIP LOCKED), up AS (UPDATE webhook_events e SET dispatched = true FROM ev WHERE e.id = ev.id), ex AS "
        "(INSERT INTO webhook_executions (policy_id, event_id) SELECT w.id, ev.id FROM ev JOIN webhook_policies w ON "
        "w.project_id = ev.project_id AND w.enabled AND ev.type = ANY (w.event_types) RETURNING id, policy_id) INSERT "
        "INTO webhook_tasks (execution_id, target) SELECT ex.id, (t.o - 1)::int FROM ex JOIN webhook_policies w ON w.id = "
        "ex.policy_id, jsonb_array_elements(w.targets) WITH ORDINALITY t(v, o)",
        1),
    /* $1 claimer, $2 registry host, $3 lease seconds: one due task (never tried, back-off over, or its lease
     * expired: the berthd delivering it died), with everything needed to send it */
    BERTH_DB__STMT(BERTH_Q_WH_CLAIM,
                   "UPDATE webhook_tasks k SET status = 'Running', attempts = k.attempts + 1, claimed_by = $1::text, lease_until = "
                   "now() + make_interval(secs => $3::int), start_time = coalesce(k.start_time, now()), update_time = now() FROM "
                   "webhook_executions x, webhook_policies w, webhook_events e, projects p WHERE k.id = (SELECT id FROM "
                   "webhook_tasks WHERE (status = 'Pending' AND next_at <= now()) OR (status = 'Running' AND lease_until < now()) "
                   "ORDER BY next_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) AND x.id = k.execution_id AND w.id = x.policy_id AND "
                   "e.id = x.event_id AND p.id = e.project_id RETURNING json_build_object('id', k.id, 'attempts', k.attempts, "
                   "'address', w.targets->k.target->>'address', 'skip_cert_verify', coalesce((w.targets->k.target->>"
                   "'skip_cert_verify')::bool, false), 'auth_sealed', w.targets->k.target->>'auth_sealed', 'secret', "
                   "encode(w.secret, 'hex'), 'ca_file', w.ca_file, 'event_id', e.event_id, 'event_type', e.type, 'format', "
                   "coalesce(w.targets->k.target->>'payload_format', 'Default'), 'body', " BODY ")::text",
                   3),
    /* $1 task, $2 claimer, $3 'ok' or 'retry', $4 HTTP status or NULL, $5 log line, $6 attempts before giving up,
     * $7 back-off base seconds: the next try waits base * 2^(attempts-1), at most $8 seconds */
    BERTH_DB__STMT(
        BERTH_Q_WH_DONE,
        "UPDATE webhook_tasks SET status = CASE WHEN $3::text = 'ok' THEN 'Success' WHEN attempts >= $6::int THEN 'Error' "
        "ELSE 'Pending' END, next_at = now() + make_interval(secs => least($7::float8 * power(2, attempts - 1), $8::float8)), "
        "lease_until = NULL, claimed_by = NULL, status_code = $4::int, log = right(log || $5::text || E'\\n', 65536), "
        "update_time = now(), end_time = CASE WHEN $3::text = 'ok' OR attempts >= $6::int THEN now() END WHERE id = "
        "$1::bigint AND claimed_by = $2::text",
        8),
};

int berth_db_webhook_enqueue(berth_dbconn_t *c, const char *project, const char *type, const char *repo, const char *digest,
                             const char *tag, const char *extra_json, berth_err_t *err)
{
    const char *p[] = {project, type, c->actor, repo, digest, tag, extra_json};
    PGresult *res = berth_db__run(c, BERTH_SQL_WEBHOOK_ENQUEUE, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    PQclear(res);
    return 0;
}
