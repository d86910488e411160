/*
 * Replication's SQL: registries (endpoints), policies, executions, tasks and resumable uploads, for the REST
 * API (registry/api/replication.c) and the engine (replication/). Every statement has the REST queries' shape
 * (sql/api.h): one row, JSON text first, the total second for lists; both run them with berth_db_api().
 */
#include "sql/db_internal.h"
#include "sql/page.h"

#define REG_JSON                                                                                                                                   \
    "json_build_object('id', g.id, 'name', g.name, 'description', g.description, 'type', g.type, 'url', g.url, "                                   \
    "'insecure', g.insecure, 'ca_file', g.ca_file, 'credential', json_build_object('type', 'basic', 'access_key', g.access_key, 'access_secret', " \
    "CASE WHEN g.access_secret IS NULL THEN '' ELSE '*****' END), 'creation_time', g.created_at, 'update_time', "                                  \
    "g.updated_at)"

/* a registry for the engine: with its sealed secret as hex */
#define REG_ENGINE(alias)                                                                                                          \
    "(SELECT json_build_object('id', g.id, 'type', g.type, 'url', g.url, 'insecure', g.insecure, 'ca_file', "                      \
    "g.ca_file, 'access_key', g.access_key, 'secret', encode(g.access_secret, 'hex')) FROM registries g WHERE g.id = " alias ")"

#define POL_JSON                                                                                                                                                                   \
    "json_build_object('id', p.id, 'name', p.name, 'description', p.description, 'src_registry', " REG_ENGINE_PUBLIC("p.src_registry_id") ", 'dest_registry', " REG_ENGINE_PUBLIC( \
        "p.dest_registry_id") ", 'dest_namespace', p.dest_namespace, "                                                                                                             \
                              "'dest_namespace_replace_count', p.dest_namespace_replace_count, 'filters', p.filters, 'trigger', p.trigger, "                                       \
                              "'override', p.override, 'enabled', p.enabled, 'replicate_deletion', p.replicate_deletion, 'speed', p.speed_kib, "                                   \
                              "'project_scope', p.project_scope, 'creator', p.creator, 'creation_time', p.created_at, 'update_time', p.updated_at)"
#define REG_ENGINE_PUBLIC(col)                                                                                                     \
    "(SELECT json_build_object('id', g.id, 'name', g.name, 'type', g.type, 'url', g.url) FROM registries g WHERE g.id = " col ")"

#define EXEC_JSON                                                                                                                  \
    "json_build_object('id', e.id, 'policy_id', e.policy_id, 'status', e.status, 'trigger', e.trigger, 'status_text', "            \
    "e.status_text, 'start_time', e.start_time, 'end_time', e.end_time, 'total', (SELECT count(*) FROM "                           \
    "replication_tasks t WHERE t.execution_id = e.id), 'succeed', (SELECT count(*) FROM replication_tasks t WHERE "                \
    "t.execution_id = e.id AND t.status = 'Succeed'), 'failed', (SELECT count(*) FROM replication_tasks t WHERE "                  \
    "t.execution_id = e.id AND t.status = 'Failed'), 'in_progress', (SELECT count(*) FROM replication_tasks t WHERE "              \
    "t.execution_id = e.id AND t.status IN ('Pending', 'InProgress')), 'stopped', (SELECT count(*) FROM "                          \
    "replication_tasks t WHERE t.execution_id = e.id AND t.status = 'Stopped'))"

/*
 * The end of an execution, for every statement that ends one (finish, stop, fail): after a CTE `e` that moved the
 * execution to its final status (RETURNING e.*), queue the REPLICATION webhook event of each local project the
 * execution touched, in the same statement, so it commits with the status (berth_webhook_enqueue: nothing without
 * a policy wanting it). The projects are the tasks' source side for a push policy (src_registry_id NULL: this
 * Berth is the source) and destination side for a pull policy; an execution without tasks (refused, stopped or
 * failed before listing anything) names the policy's: dest_namespace for a pull policy, else its project_scope or
 * the first name filter's first path segment. Harbor's event_data.replication, artifacts listed up to 100 each.
 * Answers the new status, no row when the execution was not InProgress.
 */
#define EXEC_HOOK                                                                                                                  \
    "h AS (SELECT berth_webhook_enqueue(x.project, 'REPLICATION', NULL, NULL, NULL, NULL, jsonb_build_object('replication', "      \
    "jsonb_build_object('harbor_hostname', '', 'job_status', e.status, 'execution_id', e.id, 'policy_id', pol.id, "                \
    "'policy_name', pol.name, 'policy_creator', pol.creator, 'trigger_type', e.trigger, 'override_mode', pol.override, "           \
    "'artifact_type', 'image', 'authentication_type', 'basic', 'execution_timestamp', "                                            \
    "floor(extract(epoch FROM e.start_time))::bigint, 'src_resource', jsonb_build_object('registry_name', coalesce(sr.name, "      \
    "'local'), 'endpoint', coalesce(sr.url, ''), 'registry_type', coalesce(sr.type, 'berth')), 'dest_resource', "                  \
    "jsonb_build_object('registry_name', coalesce(dr.name, 'local'), 'endpoint', coalesce(dr.url, ''), 'registry_type', "          \
    "coalesce(dr.type, 'berth'), 'namespace', pol.dest_namespace), 'successful_artifact', (SELECT coalesce(jsonb_agg("             \
    "jsonb_build_object('type', 'image', 'status', 'Success', 'name_tag', a.dst_resource)), '[]') FROM (SELECT dst_resource "      \
    "FROM replication_tasks WHERE execution_id = e.id AND status = 'Succeed' ORDER BY id LIMIT 100) a), 'failed_artifact', "       \
    "(SELECT coalesce(jsonb_agg(jsonb_build_object('type', 'image', 'status', 'Failed', 'name_tag', a.dst_resource)), '[]') "      \
    "FROM (SELECT dst_resource FROM replication_tasks WHERE execution_id = e.id AND status = 'Failed' ORDER BY id LIMIT 100) "     \
    "a)))) AS n FROM e JOIN replication_policies pol ON pol.id = e.policy_id LEFT JOIN registries sr ON sr.id = "                  \
    "pol.src_registry_id LEFT JOIN registries dr ON dr.id = pol.dest_registry_id CROSS JOIN LATERAL (SELECT "                      \
    "split_part(CASE WHEN pol.src_registry_id IS NULL THEN t.src_resource ELSE t.dst_resource END, '/', 1) AS project FROM "       \
    "replication_tasks t WHERE t.execution_id = e.id UNION SELECT split_part(CASE WHEN pol.src_registry_id IS NOT NULL AND "       \
    "pol.dest_namespace <> '' THEN pol.dest_namespace ELSE coalesce(nullif(pol.project_scope, ''), (SELECT f->>'value' FROM "      \
    "jsonb_array_elements(CASE WHEN jsonb_typeof(pol.filters) = 'array' THEN pol.filters ELSE '[]' END) f WHERE "                  \
    "f->>'type' = 'name' LIMIT 1), '') END, '/', 1) WHERE NOT EXISTS (SELECT 1 FROM replication_tasks t WHERE "                    \
    "t.execution_id = e.id)) x) "                                                                                                  \
    "SELECT to_json(e.status)::text FROM e WHERE (SELECT count(*) FROM h) >= 0"

#define TASK_JSON                                                                                                                  \
    "json_build_object('id', t.id, 'execution_id', t.execution_id, 'resource_type', t.resource_type, 'src_resource', "             \
    "t.src_resource, 'dst_resource', t.dst_resource, 'operation', t.operation, 'status', t.status, 'attempts', "                   \
    "t.attempts, 'bytes_sent', t.bytes_sent, 'bytes_total', t.bytes_total, 'start_time', t.start_time, 'end_time', "               \
    "t.end_time)"

const berth_db__stmt_t berth_db__replication_stmts[BERTH_SQL__COUNT] = {
    /* ---- endpoints ---- */
    /* $1 limit, $2 offset, $3 sort */
    BERTH_DB__STMT(BERTH_Q_REG_LIST,
                   "WITH f AS (SELECT * FROM registries) " PAGE(REG_JSON, "g",
                                                                SORT_BY("$3", "id", "id") SORT_BY("$3", "name", "name")
                                                                    SORT_BY("$3", "type", "type") SORT_BY("$3", "url", "url")
                                                                        SORT_BY("$3", "creation_time", "created_at")
                                                                            SORT_BY("$3", "update_time", "updated_at") "id",
                                                                "$1", "$2"),
                   3),
    BERTH_DB__STMT(BERTH_Q_REG_GET, "SELECT " REG_JSON "::text FROM registries g WHERE g.id = $1::bigint", 1),
    BERTH_DB__STMT(BERTH_Q_REG_ENGINE, "SELECT " REG_ENGINE("$1::bigint") "::text", 1),
    /* $1 name, $2 type, $3 url, $4 access key, $5 sealed secret hex (NULL none), $6 insecure, $7 ca file, $8 description */
    BERTH_DB__STMT(
        BERTH_Q_REG_CREATE,
        "INSERT INTO registries (name, type, url, access_key, access_secret, insecure, ca_file, description) VALUES ($1::text, "
        "$2::text, $3::text, coalesce($4::text, ''), decode($5::text, 'hex'), coalesce($6::bool, false), coalesce($7::text, ''), "
        "coalesce($8::text, '')) RETURNING json_build_object('id', id)::text",
        8),
    /* $1 id, then as for create (NULL keeps a value) */
    BERTH_DB__STMT(
        BERTH_Q_REG_UPDATE,
        "UPDATE registries SET name = coalesce($2::text, name), url = coalesce($3::text, url), access_key = coalesce($4::text, "
        "access_key), access_secret = coalesce(decode($5::text, 'hex'), access_secret), insecure = coalesce($6::bool, insecure), "
        "ca_file = coalesce($7::text, ca_file), description = coalesce($8::text, description), updated_at = now() WHERE id = $1::bigint",
        8),
    BERTH_DB__STMT(BERTH_Q_REG_DELETE, "DELETE FROM registries WHERE id = $1::bigint RETURNING to_json(name)::text", 1),
    /* ---- policies ($1 project scope or NULL for all) ---- */
    BERTH_DB__STMT(BERTH_Q_POL_LIST,
                   "WITH f AS (SELECT * FROM replication_policies p WHERE $1::text IS NULL OR p.project_scope = $1::text) " PAGE(
                       POL_JSON, "p",
                       SORT_BY("$4", "id", "id") SORT_BY("$4", "name", "name") SORT_BY("$4", "creation_time", "created_at")
                           SORT_BY("$4", "update_time", "updated_at") "id",
                       "$2", "$3"),
                   4),
    BERTH_DB__STMT(BERTH_Q_POL_GET, "SELECT " POL_JSON "::text FROM replication_policies p WHERE p.id = $1::bigint", 1),
    /* $1 the policy as JSON (validated in C) */
    BERTH_DB__STMT(
        BERTH_Q_POL_CREATE,
        "INSERT INTO replication_policies (name, description, src_registry_id, dest_registry_id, dest_namespace, "
        "dest_namespace_replace_count, filters, trigger, override, enabled, replicate_deletion, speed_kib, project_scope, creator) "
        "SELECT x.name, coalesce(x.description, ''), x.src, x.dst, coalesce(x.dest_namespace, ''), coalesce(x.replace_count, -1), "
        "coalesce(x.filters, '[]'), coalesce(x.trigger, '{\"type\":\"manual\"}'), coalesce(x.override, true), coalesce(x.enabled, true), "
        "coalesce(x.replicate_deletion, false), coalesce(x.speed, 0), x.project_scope, coalesce(x.creator, '') "
        "FROM json_to_record($1::json) AS x(name text, description text, src bigint, dst bigint, dest_namespace text, "
        "replace_count int, filters jsonb, trigger jsonb, override bool, enabled bool, replicate_deletion bool, speed int, "
        "project_scope text, creator text) RETURNING json_build_object('id', id)::text",
        1),
    /* $1 id, $2 the same JSON shape; absent keys keep their values */
    BERTH_DB__STMT(
        BERTH_Q_POL_UPDATE,
        "UPDATE replication_policies p SET name = coalesce(x.name, p.name), description = coalesce(x.description, p.description), "
        "dest_namespace = coalesce(x.dest_namespace, p.dest_namespace), dest_namespace_replace_count = coalesce(x.replace_count, "
        "p.dest_namespace_replace_count), filters = coalesce(x.filters, p.filters), trigger = coalesce(x.trigger, p.trigger), "
        "override = coalesce(x.override, p.override), enabled = coalesce(x.enabled, p.enabled), replicate_deletion = "
        "coalesce(x.replicate_deletion, p.replicate_deletion), speed_kib = coalesce(x.speed, p.speed_kib), updated_at = now() "
        "FROM json_to_record($2::json) AS x(name text, description text, dest_namespace text, replace_count int, filters jsonb, "
        "trigger jsonb, override bool, enabled bool, replicate_deletion bool, speed int) WHERE p.id = $1::bigint",
        2),
    BERTH_DB__STMT(BERTH_Q_POL_DELETE, "DELETE FROM replication_policies WHERE id = $1::bigint RETURNING to_json(name)::text", 1),
    /* enabled push policies (this Berth is the source) triggered by events */
    BERTH_DB__STMT(
        BERTH_Q_POL_EVENT,
        "SELECT coalesce(json_agg(json_build_object('id', p.id, 'filters', p.filters, 'replicate_deletion', p.replicate_deletion)), "
        "'[]')::text FROM replication_policies p WHERE p.enabled AND p.src_registry_id IS NULL AND p.trigger->>'type' = 'event_based'",
        0),
    BERTH_DB__STMT(
        BERTH_Q_POL_SCHEDULED,
        "SELECT coalesce(json_agg(json_build_object('id', p.id, 'cron', p.trigger->'trigger_settings'->>'cron')), '[]')::text "
        "FROM replication_policies p WHERE p.enabled AND p.trigger->>'type' = 'scheduled'",
        0),
    /* $1 policy, $2 the minute (epoch seconds) its cron fired: one berthd wins it and starts the execution */
    BERTH_DB__STMT(BERTH_Q_POL_FIRE,
                   "UPDATE replication_policies SET last_fired = to_timestamp($2::bigint) WHERE id = $1::bigint AND (last_fired "
                   "IS NULL OR last_fired < to_timestamp($2::bigint)) RETURNING 'true'::text",
                   2),
    /* ---- executions and tasks ---- */
    BERTH_DB__STMT(
        BERTH_Q_EXEC_LIST,
        "WITH f AS (SELECT e.* FROM replication_executions e JOIN replication_policies p ON p.id = e.policy_id WHERE ($1::bigint "
        "IS NULL OR e.policy_id = $1::bigint) AND ($2::text IS NULL OR p.project_scope = $2::text)) " PAGE(
            EXEC_JSON, "e",
            SORT_BY("$5", "id", "id") SORT_BY("$5", "start_time", "start_time") SORT_BY("$5", "end_time", "end_time")
                SORT_BY("$5", "status", "status") "id DESC",
            "$3", "$4"),
        5),
    BERTH_DB__STMT(BERTH_Q_EXEC_GET, "SELECT " EXEC_JSON "::text FROM replication_executions e WHERE e.id = $1::bigint", 1),
    /* $1 policy, $2 trigger: skipped (NULL) while the policy's previous execution still runs */
    BERTH_DB__STMT(
        BERTH_Q_EXEC_CREATE,
        "INSERT INTO replication_executions (policy_id, trigger) SELECT $1::bigint, $2::text WHERE $3::bool OR NOT EXISTS (SELECT 1 "
        "FROM replication_executions e WHERE e.policy_id = $1::bigint AND e.status = 'InProgress') RETURNING "
        "json_build_object('id', id)::text",
        3),
    /* $1 execution: it and its waiting or running tasks end Stopped (a task in flight notices and gives up) */
    BERTH_DB__STMT(
        BERTH_Q_EXEC_STOP,
        "WITH t AS (UPDATE replication_tasks SET status = 'Stopped', end_time = now() WHERE execution_id = $1::bigint AND "
        "status IN ('Pending', 'InProgress')), e AS (UPDATE replication_executions e SET status = 'Stopped', end_time = "
        "now() WHERE e.id = $1::bigint AND e.status = 'InProgress' RETURNING e.*), " EXEC_HOOK,
        1),
    /* $1 execution, $2 status text: done when no task waits or runs */
    BERTH_DB__STMT(
        BERTH_Q_EXEC_FINISH,
        "WITH e AS (UPDATE replication_executions e SET status = CASE WHEN EXISTS (SELECT 1 FROM replication_tasks t WHERE "
        "t.execution_id = e.id AND t.status = 'Failed') THEN 'Failed' ELSE 'Succeed' END, status_text = coalesce($2::text, "
        "status_text), end_time = now() WHERE e.id = $1::bigint AND e.status = 'InProgress' AND NOT EXISTS (SELECT 1 FROM "
        "replication_tasks t WHERE t.execution_id = e.id AND t.status IN ('Pending', 'InProgress')) RETURNING e.*), " EXEC_HOOK,
        2),
    /* $1 execution, $2 why: a run refused before it copied anything */
    BERTH_DB__STMT(BERTH_Q_EXEC_FAIL,
                   "WITH e AS (UPDATE replication_executions e SET status = 'Failed', status_text = $2::text, end_time = now() "
                   "WHERE e.id = $1::bigint AND e.status = 'InProgress' RETURNING e.*), " EXEC_HOOK,
                   2),
    BERTH_DB__STMT(BERTH_Q_EXEC_RUNNING,
                   "SELECT to_json(status = 'InProgress')::text FROM replication_executions WHERE id = $1::bigint", 1),
    BERTH_DB__STMT(
        BERTH_Q_TASK_ADD,
        "INSERT INTO replication_tasks (execution_id, src_resource, dst_resource, operation) VALUES ($1::bigint, $2::text, $3::text, "
        "$4::text)",
        4),
    BERTH_DB__STMT(BERTH_Q_TASK_LIST,
                   "WITH f AS (SELECT t.* FROM replication_tasks t WHERE t.execution_id = $1::bigint) " PAGE(
                       TASK_JSON, "t",
                       SORT_BY("$4", "id", "id") SORT_BY("$4", "start_time", "start_time") SORT_BY("$4", "end_time", "end_time")
                           SORT_BY("$4", "status", "status") SORT_BY("$4", "resource", "src_resource") "id",
                       "$2", "$3"),
                   4),
    BERTH_DB__STMT(BERTH_Q_TASK_LOG,
                   "SELECT to_json(log)::text FROM replication_tasks WHERE id = $2::bigint AND execution_id = $1::bigint", 2),
    /* the next runnable task, with what it needs: policy, endpoints (secrets sealed). A task whose berthd has been
     * silent for five minutes (no progress heartbeat: it died) is taken over by any other */
    BERTH_DB__STMT(
        BERTH_Q_TASK_CLAIM,
        "UPDATE replication_tasks t SET status = 'InProgress', attempts = t.attempts + 1, start_time = coalesce(t.start_time, now()), "
        "claimed_by = $1::text, heartbeat = now() "
        "FROM replication_executions e, replication_policies p WHERE t.id = (SELECT t2.id FROM replication_tasks t2 JOIN "
        "replication_executions e2 ON e2.id = t2.execution_id WHERE ((t2.status = 'Pending' AND t2.not_before <= now()) OR "
        "(t2.status = 'InProgress' AND t2.heartbeat < now() - interval '5 minutes')) AND e2.status = 'InProgress' ORDER BY "
        "t2.id LIMIT 1 FOR UPDATE OF t2 SKIP LOCKED) AND e.id = t.execution_id AND p.id = "
        "e.policy_id RETURNING json_build_object('id', t.id, 'execution_id', t.execution_id, 'src', t.src_resource, 'dst', "
        "t.dst_resource, 'operation', t.operation, 'attempts', t.attempts, 'override', p.override, 'speed', p.speed_kib, "
        "'src_registry', " REG_ENGINE("p.src_registry_id") ", 'dest_registry', " REG_ENGINE("p.dest_registry_id") ")::text",
        1),
    /* $1 task, $2 status, $3 log line, $4 bytes total, $5 retry delay seconds (Pending again) */
    BERTH_DB__STMT(
        BERTH_Q_TASK_DONE,
        "UPDATE replication_tasks SET status = $2::text, log = log || $3::text || E'\\n', bytes_total = bytes_total + "
        "coalesce($4::bigint, 0), end_time = CASE WHEN $2::text = 'Pending' THEN NULL ELSE now() END, not_before = now() + "
        "make_interval(secs => coalesce($5::int, 0)) WHERE id = $1::bigint AND status = 'InProgress' RETURNING "
        "to_json(execution_id)::text",
        5),
    BERTH_DB__STMT(BERTH_Q_TASK_PROGRESS,
                   "UPDATE replication_tasks SET bytes_sent = bytes_sent + $2::bigint, heartbeat = now() WHERE id = $1::bigint", 2),
    /* $1 this instance: its own unfinished tasks, and any an instance left silent for five minutes */
    BERTH_DB__STMT(
        BERTH_Q_TASKS_RESET,
        "UPDATE replication_tasks SET status = 'Pending' WHERE status = 'InProgress' AND (claimed_by = $1::text OR heartbeat IS NULL "
        "OR heartbeat < now() - interval '5 minutes')",
        1),
    BERTH_DB__STMT(BERTH_Q_UPLOAD_GET,
                   "SELECT to_json(location)::text FROM replication_uploads WHERE task_id = $1::bigint AND digest = $2::text", 2),
    BERTH_DB__STMT(
        BERTH_Q_UPLOAD_PUT,
        "INSERT INTO replication_uploads (task_id, digest, location) VALUES ($1::bigint, $2::text, $3::text) ON CONFLICT (task_id, "
        "digest) DO UPDATE SET location = EXCLUDED.location",
        3),
    BERTH_DB__STMT(BERTH_Q_UPLOAD_DEL, "DELETE FROM replication_uploads WHERE task_id = $1::bigint AND digest = $2::text", 2),
};
