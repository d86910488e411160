#include "sql/api.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sql/db_internal.h"
#include "sql/gateway.h"
#include "sql/page.h"

/*
 * Harbor's JSON shapes, built by PostgreSQL. Lists return (json array of one page, total). Every parameter is
 * cast where it is used, so that the prepared statement's types are fixed.
 */

/* Projects the caller may see: $1 user/robot id, $2 system admin, $3 robot. */
#define VISIBLE(p)                                                                                                                 \
    "($2::bool OR " p ".public OR (NOT $3::bool AND berth_member_role(" p ".id, $1::bigint) IS NOT NULL) OR ($3::bool "            \
    "AND EXISTS (SELECT 1 FROM robot_permissions rp WHERE rp.robot_id = $1::bigint AND rp.namespace IN (" p ".name, '*'))))"

#define ROLE_NAME(r)                                                                                                               \
    "CASE " r " WHEN 1 THEN 'projectAdmin' WHEN 2 THEN 'developer' WHEN 3 THEN 'guest' WHEN 4 THEN 'maintainer' "                  \
    "WHEN 5 THEN 'limitedGuest' END"

/* A project as Harbor shows it; `uid` and `robot` name the caller's parameters for its role. */
#define PROJECT_JSON(uid, robot)                                                                                                   \
    "json_build_object('project_id', p.id, 'name', p.name, 'owner_id', p.owner_id, 'owner_name', "                                 \
    "coalesce((SELECT u.username FROM users u WHERE u.id = p.owner_id), ''), 'creation_time', p.created_at, "                      \
    "'update_time', p.updated_at, 'repo_count', (SELECT count(*) FROM repositories r WHERE r.project_id = p.id), "                 \
    "'metadata', json_build_object('public', CASE WHEN p.public THEN 'true' ELSE 'false' END, 'isa_policy', "                      \
    "p.isa_policy, 'isa_require_scan_pass', CASE WHEN p.isa_require_scan_pass THEN 'true' ELSE 'false' END, 'proxy_speed_kb', "    \
    "p.proxy_speed_kb::text, 'retention_id', (SELECT rp.id::text FROM retention_policies rp WHERE rp.project_id = p.id), "         \
    "'hpc_squashfs', p.hpc_squashfs, 'hpc_squashfs_tags', p.hpc_squashfs_tags), "                                                  \
    "'registry_id', p.registry_id, "                                                                                               \
    "'current_user_role_id', CASE WHEN " robot "::bool THEN 0 ELSE coalesce(berth_member_role(p.id, " uid "::bigint), 0) END)"

/* Artifacts a repository lists: not a referrer, and not only the child of an index (tagged children count) */
#define TOP_LEVEL                                                                                                                  \
    "m.subject_digest IS NULL AND (EXISTS (SELECT 1 FROM tags t WHERE t.manifest_id = m.id) OR NOT EXISTS "                        \
    "(SELECT 1 FROM manifest_refs mr JOIN manifests pm ON pm.id = mr.manifest_id WHERE pm.repository_id = "                        \
    "m.repository_id AND mr.digest = m.digest AND mr.kind = 1))"

/* Harbor's ImmutableRule */
#define IMMUTABLE_RULE_JSON                                                                                                        \
    "json_build_object('id', x.id, 'priority', x.priority, 'disabled', x.disabled, 'action', x.action, 'template', "               \
    "x.template, 'params', '{}'::json, 'scope_selectors', x.scope_selectors, 'tag_selectors', x.tag_selectors)"

/* Harbor's RetentionExecution and RetentionExecutionTask (plus what a task deleted, or would in a dry run) */
#define RET_EXEC_JSON                                                                                                              \
    "json_build_object('id', x.id, 'policy_id', x.policy_id, 'start_time', x.start_time, 'end_time', x.end_time, 'status', "       \
    "x.status, 'trigger', x.trigger, 'dry_run', x.dry_run)"
#define RET_TASK_JSON                                                                                                              \
    "json_build_object('id', x.id, 'execution_id', x.execution_id, 'repository', x.repository, 'job_id', x.id::text, 'status', "   \
    "x.status, 'status_code', 0, 'status_revision', 0, 'start_time', x.start_time, 'end_time', x.end_time, 'total', x.total, "     \
    "'retained', x.retained, 'deleted', x.deleted)"

#define INDEX_TYPES "('application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json')"

/* Harbor's artifact type: IMAGE for an image manifest (its config is an image config, or it has none) and for
 * an index or manifest list; CHART for a Helm chart; UNKNOWN for any other artifact */
#define ARTIFACT_KIND                                                                                                              \
    "CASE WHEN m.media_type IN " INDEX_TYPES " OR m.artifact_type IS NULL OR m.artifact_type IN "                                  \
    "('application/vnd.oci.image.config.v1+json', 'application/vnd.docker.container.image.v1+json') THEN 'IMAGE' "                 \
    "WHEN m.artifact_type = 'application/vnd.cncf.helm.config.v1+json' THEN 'CHART' ELSE 'UNKNOWN' END"

#define ARTIFACT_JSON                                                                                                              \
    "json_build_object('id', m.id, 'repository_id', m.repository_id, 'repository_name', (SELECT r2.name FROM "                     \
    "repositories r2 WHERE r2.id = m.repository_id), 'digest', m.digest, 'manifest_media_type', m.media_type, "                    \
    "'media_type', m.media_type, 'artifact_type', m.artifact_type, "                                                               \
    "'type', " ARTIFACT_KIND ", "                                                                                                  \
    "'size', m.size + coalesce((SELECT sum(mr.size) FROM manifest_refs mr WHERE mr.manifest_id = m.id AND mr.kind = 0), 0), "      \
    "'push_time', m.created_at, 'pull_time', m.pull_time, 'annotations', m.annotations, "                                          \
    "'tags', coalesce((SELECT json_agg(json_build_object('name', t.name, 'push_time', t.updated_at, 'repository_id', "             \
    "t.repository_id, 'artifact_id', m.id) ORDER BY t.name) FROM tags t WHERE t.manifest_id = m.id), '[]'), "                      \
    "'references', CASE WHEN m.media_type IN " INDEX_TYPES " THEN coalesce((SELECT json_agg(json_build_object("                    \
    "'child_digest', e->>'digest', 'child_media_type', e->>'mediaType', 'platform', e->'platform', 'annotations', "                \
    "e->'annotations')) FROM jsonb_array_elements(convert_from(m.content, 'UTF8')::jsonb->'manifests') e), '[]') END, "            \
    "'isa_variants', (SELECT json_agg(json_build_object('position', v.position, 'digest', v.digest, 'architecture', "              \
    "v.architecture, 'variant', v.variant, 'level', v.level, 'features', v.features, 'target', v.target, 'scan_status', "          \
    "coalesce(s.status, 'pending'), 'scan_max_level', s.max_level) ORDER BY v.position) FROM isa_variants v LEFT JOIN "            \
    "isa_scans s ON " ISA_SCAN_OF_ENTRY " WHERE v.manifest_id = m.id), "                                                           \
    "'squashfs', (SELECT " BERTH_SQL_SQFS_JOB_JSON " FROM sqfs_jobs j WHERE j.repository_id = m.repository_id AND j.digest = "     \
    "m.digest), "                                                                                                                  \
    "'accessories', coalesce((SELECT json_agg(json_build_object('digest', a.digest, 'artifact_type', a.artifact_type, "            \
    "'size', a.size) ORDER BY a.digest) FROM manifests a WHERE a.repository_id = m.repository_id AND a.subject_digest "            \
    "= m.digest), '[]'))"

#define REPO_JSON                                                                                                                  \
    "json_build_object('id', r.id, 'project_id', r.project_id, 'name', r.name, 'artifact_count', (SELECT count(*) "                \
    "FROM manifests m WHERE m.repository_id = r.id AND " TOP_LEVEL "), 'pull_count', r.pull_count, 'creation_time', "              \
    "r.created_at, 'update_time', r.updated_at)"

#define USER_JSON                                                                                                                     \
    "json_build_object('user_id', u.id, 'username', u.username, 'email', u.email, 'realname', u.realname, "                           \
    "'comment', u.comment, 'sysadmin_flag', u.sysadmin OR u.ldap_admin, 'creation_time', u.created_at, 'update_time', u.updated_at, " \
    "'internal', u.internal)"

#define MEMBER_JSON                                                                                                                \
    "json_build_object('id', x.id, 'project_id', x.project_id, 'entity_name', x.username, 'entity_id', x.entity_id, "              \
    "'entity_type', x.entity_type, 'role_id', x.role, 'role_name', " ROLE_NAME("x.role") ")"

/* members, users and groups alike, as rows for MEMBER_JSON */
#define MEMBER_ROWS                                                                                                                \
    "SELECT m.id, m.project_id, coalesce(m.user_id, m.group_id) AS entity_id, CASE WHEN m.user_id IS NULL THEN 'g' "               \
    "ELSE 'u' END AS entity_type, m.role, coalesce(u.username, g.group_name) AS username FROM project_members m "                  \
    "LEFT JOIN users u ON u.id = m.user_id LEFT JOIN user_groups g ON g.id = m.group_id "

#define ROBOT_JSON                                                                                                                 \
    "json_build_object('id', r.id, 'name', r.name, 'description', r.description, 'level', r.level, 'project_id', "                 \
    "r.project_id, 'project_name', (SELECT p.name FROM projects p WHERE p.id = r.project_id), 'disable', r.disabled, "             \
    "'expires_at', coalesce(floor(extract(epoch FROM r.expires_at))::bigint, -1), "                                                \
    "'duration', CASE WHEN r.expires_at IS NULL THEN -1 ELSE ceil(extract(epoch FROM r.expires_at - r.created_at) "                \
    "/ 86400)::int END, 'creation_time', r.created_at, 'update_time', r.updated_at, 'creator', r.creator, "                        \
    "'permissions', coalesce((SELECT json_agg(json_build_object('kind', 'project', 'namespace', g.namespace, "                     \
    "'access', g.access) ORDER BY g.namespace) FROM (SELECT rp.namespace, json_agg(json_build_object('resource', "                 \
    "rp.resource, 'action', rp.action) ORDER BY rp.resource, rp.action) AS access FROM robot_permissions rp WHERE "                \
    "rp.robot_id = r.id GROUP BY rp.namespace) g), '[]'))"

#define USERGROUP_JSON                                                                                                             \
    "json_build_object('id', g.id, 'group_name', g.group_name, 'group_type', g.group_type, 'ldap_group_dn', "                      \
    "g.ldap_group_dn)"

/* Harbor's Quota: the project as its reference, hard and used per resource (storage only) */
#define QUOTA_ROWS                                                                                                                          \
    "SELECT q.id, q.hard_storage, berth_quota_used(q.project_id) AS used_storage, q.created_at, q.updated_at, p.id AS project_id, p.name, " \
    "coalesce(u.username, '') AS owner_name FROM quotas q JOIN projects p ON p.id = q.project_id LEFT JOIN users u ON "                     \
    "u.id = p.owner_id "
#define QUOTA_JSON                                                                                                                 \
    "json_build_object('id', x.id, 'ref', json_build_object('id', x.project_id, 'name', x.name, 'owner_name', x.owner_name), "     \
    "'hard', json_build_object('storage', x.hard_storage), 'used', json_build_object('storage', x.used_storage), "                 \
    "'creation_time', x.created_at, 'update_time', x.updated_at)"

#define Q(id, sql, n) BERTH_DB__STMT(id, sql, n)

const berth_db__stmt_t berth_db__api_stmts[BERTH_SQL__COUNT] = {
    /* $1 uid, $2 admin, $3 robot, $4 name exact, $5 name substring, $6 public, $7 owner, $8 limit, $9 offset, $10 sort */
    Q(BERTH_Q_PROJECTS_LIST,
      "WITH f AS (SELECT p.*, CASE WHEN $10::text IN ('repo_count', '-repo_count') THEN (SELECT count(*) FROM repositories r "
      "WHERE r.project_id = p.id) END AS n_repos FROM projects p WHERE " VISIBLE(
          "p") " AND ($4::text IS NULL OR p.name = $4::text) AND "
               "($5::text IS NULL OR strpos(p.name, $5::text) > 0) AND ($6::bool IS NULL OR p.public = $6::bool) AND "
               "($7::text IS NULL OR p.owner_id = (SELECT id FROM users WHERE username = $7::text))) " PAGE(
                   PROJECT_JSON("$1", "$3"), "p",
                   SORT_BY("$10", "name", "name") SORT_BY("$10", "creation_time", "created_at")
                       SORT_BY("$10", "update_time", "updated_at") SORT_BY("$10", "repo_count", "n_repos") "name",
                   "$8", "$9"),
      10),
    /* $1 uid, $2 robot, $3 name */
    Q(BERTH_Q_PROJECT_GET, "SELECT " PROJECT_JSON("$1", "$2") "::text FROM projects p WHERE p.name = $3::text", 3),
    Q(BERTH_Q_PROJECT_NAME_BY_ID, "SELECT to_json(name)::text FROM projects WHERE id = $1::bigint", 1),
    /* $1 name, $2 public, $3 owner id (NULL for robots): the creator becomes project admin; $4 registry id (a proxy
     * cache; no row when that endpoint does not exist), $5 proxy_speed_kb, $6 storage limit */
    Q(BERTH_Q_PROJECT_CREATE,
      "WITH p AS (INSERT INTO projects (name, public, owner_id, registry_id, proxy_speed_kb) SELECT $1::text, $2::bool, $3::bigint, "
      "$4::bigint, coalesce($5::bigint, -1) WHERE $4::bigint IS NULL OR EXISTS (SELECT 1 FROM registries g WHERE g.id = $4::bigint) "
      "RETURNING id), "
      "m AS (INSERT INTO project_members (project_id, user_id, role) SELECT p.id, $3::bigint, 1 FROM p WHERE $3::bigint "
      "IS NOT NULL), q AS (INSERT INTO quotas (project_id, hard_storage) SELECT p.id, $6::bigint FROM p) "
      "SELECT json_build_object('project_id', id)::text FROM p",
      6),
    /* $1 id, $2 public, $3 isa_policy, $4 isa_require_scan_pass, $5 proxy_speed_kb, $6 hpc_squashfs, $7 hpc_squashfs_tags
     * (NULL keeps each) */
    Q(BERTH_Q_PROJECT_UPDATE,
      "UPDATE projects SET public = coalesce($2::bool, public), isa_policy = coalesce($3::text, isa_policy), "
      "isa_require_scan_pass = coalesce($4::bool, isa_require_scan_pass), proxy_speed_kb = coalesce($5::bigint, proxy_speed_kb), "
      "hpc_squashfs = coalesce($6::text, hpc_squashfs), hpc_squashfs_tags = coalesce($7::text, hpc_squashfs_tags), "
      "updated_at = now() WHERE id = $1::bigint",
      7),
    /* $1 id: only an empty project goes */
    Q(BERTH_Q_PROJECT_DELETE,
      "DELETE FROM projects p WHERE p.id = $1::bigint AND NOT EXISTS (SELECT 1 FROM repositories r WHERE r.project_id = p.id)", 1),
    /* $1 id: counts and the storage its repositories hold (each blob and manifest once) */
    Q(BERTH_Q_PROJECT_SUMMARY,
      "SELECT json_build_object('repo_count', (SELECT count(*) FROM repositories WHERE project_id = $1::bigint), "
      "'project_admin_count', (SELECT count(*) FROM project_members WHERE project_id = $1::bigint AND role = 1), "
      "'maintainer_count', (SELECT count(*) FROM project_members WHERE project_id = $1::bigint AND role = 4), "
      "'developer_count', (SELECT count(*) FROM project_members WHERE project_id = $1::bigint AND role = 2), "
      "'guest_count', (SELECT count(*) FROM project_members WHERE project_id = $1::bigint AND role = 3), "
      "'limited_guest_count', (SELECT count(*) FROM project_members WHERE project_id = $1::bigint AND role = 5), "
      "'quota', coalesce((SELECT json_build_object('id', q.id, 'hard', json_build_object('storage', q.hard_storage), "
      "'used', json_build_object('storage', berth_quota_used(q.project_id))) FROM quotas q WHERE q.project_id = $1::bigint), "
      "json_build_object('hard', json_build_object('storage', -1), 'used', json_build_object('storage', "
      "berth_quota_recount($1::bigint)))))::text",
      1),
    /* $1 reference ('project' or NULL), $2 reference_id (project id or NULL), $3 limit, $4 offset, $5 sort */
    Q(BERTH_Q_QUOTAS_LIST,
      "WITH f AS (" QUOTA_ROWS "WHERE ($1::text IS NULL OR $1::text = 'project') AND ($2::bigint IS NULL OR "
      "p.id = $2::bigint)) " PAGE(QUOTA_JSON, "x",
                                  SORT_BY("$5", "hard.storage", "hard_storage") SORT_BY("$5", "used.storage", "used_storage")
                                      SORT_BY("$5", "creation_time", "created_at") SORT_BY("$5", "update_time", "updated_at") "id",
                                  "$3", "$4"),
      5),
    /* $1 quota id */
    Q(BERTH_Q_QUOTA_GET, "SELECT " QUOTA_JSON "::text FROM (" QUOTA_ROWS "WHERE q.id = $1::bigint) x", 1),
    /* $1 quota id, $2 hard storage: answers the project's name (audit) */
    Q(BERTH_Q_QUOTA_UPDATE,
      "UPDATE quotas q SET hard_storage = $2::bigint, updated_at = now() FROM projects p WHERE p.id = q.project_id AND "
      "q.id = $1::bigint RETURNING to_json(p.name)::text",
      2),
    /* $1 project id, $2 name substring, $3 limit, $4 offset, $5 sort */
    Q(BERTH_Q_MEMBERS_LIST,
      "WITH f AS (SELECT * FROM (" MEMBER_ROWS "WHERE m.project_id = $1::bigint) r WHERE $2::text IS NULL OR "
      "strpos(r.username, $2::text) > 0) " PAGE(MEMBER_JSON, "x",
                                                SORT_BY("$5", "entity_name", "username") SORT_BY("$5", "role_id", "role")
                                                    SORT_BY("$5", "id", "id") "username",
                                                "$3", "$4"),
      5),
    /* $1 project id, $2 member id */
    Q(BERTH_Q_MEMBER_GET,
      "SELECT " MEMBER_JSON "::text FROM (" MEMBER_ROWS "WHERE m.project_id = $1::bigint AND m.id = $2::bigint) x", 2),
    /* $1 project id, $2 username, $3 role */
    Q(BERTH_Q_MEMBER_ADD,
      "INSERT INTO project_members (project_id, user_id, role) SELECT $1::bigint, u.id, $3::smallint FROM users u "
      "WHERE u.username = $2::text RETURNING json_build_object('id', id)::text",
      3),
    /* $1 project id, $2 group id, $3 role */
    Q(BERTH_Q_MEMBER_ADD_GROUP,
      "INSERT INTO project_members (project_id, group_id, role) SELECT $1::bigint, g.id, $3::smallint FROM user_groups g "
      "WHERE g.id = $2::bigint RETURNING json_build_object('id', id)::text",
      3),
    /* $1 project id, $2 member id, $3 role */
    Q(BERTH_Q_MEMBER_UPDATE, "UPDATE project_members SET role = $3::smallint WHERE project_id = $1::bigint AND id = $2::bigint", 3),
    /* $1 project id, $2 member id */
    Q(BERTH_Q_MEMBER_DELETE,
      "DELETE FROM project_members m WHERE m.project_id = $1::bigint AND m.id = $2::bigint RETURNING to_json(coalesce("
      "(SELECT u.username FROM users u WHERE u.id = m.user_id), (SELECT g.group_name FROM user_groups g WHERE g.id = "
      "m.group_id)))::text",
      2),
    /* $1 project id, $2 name substring, $3 limit, $4 offset, $5 sort (berth_api_sort); artifact_count is only
       computed when asked to sort by it */
    Q(BERTH_Q_REPOS_LIST,
      "WITH f AS (SELECT r.*, CASE WHEN $5::text IN ('artifact_count', '-artifact_count') THEN (SELECT count(*) FROM "
      "manifests m WHERE m.repository_id = r.id AND " TOP_LEVEL ") END AS n_artifacts FROM repositories r WHERE "
      "r.project_id = $1::bigint AND ($2::text IS NULL OR strpos(r.name, $2::text) > 0)) " PAGE(
          REPO_JSON, "r",
          SORT_BY("$5", "name", "name") SORT_BY("$5", "update_time", "updated_at") SORT_BY("$5", "creation_time", "created_at")
              SORT_BY("$5", "pull_count", "pull_count") SORT_BY("$5", "artifact_count", "n_artifacts") "name",
          "$3", "$4"),
      5),
    /* $1 full repository name */
    Q(BERTH_Q_REPO_GET, "SELECT " REPO_JSON "::text FROM repositories r WHERE r.name = $1::text", 1),
    /* $1 repository, $2 tag (exact, NULL for all), $3 limit, $4 offset, $5 type (q=type=IMAGE), $6 sort; newest first */
    Q(BERTH_Q_ARTIFACTS_LIST,
      "WITH f AS (SELECT m.* FROM repositories r JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1::text AND " TOP_LEVEL
      " AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM tags t WHERE t.manifest_id = m.id AND t.name = $2::text)) "
      "AND ($5::text IS NULL OR " ARTIFACT_KIND " = $5::text)) " PAGE(
          ARTIFACT_JSON, "m",
          SORT_BY("$6", "push_time", "created_at") SORT_BY("$6", "pull_time", "pull_time") SORT_BY("$6", "size", "size")
              SORT_BY("$6", "digest", "digest") SORT_BY("$6", "id", "id") "created_at DESC, id DESC",
          "$3", "$4"),
      6),
    /* $1 repository, $2 digest or tag */
    Q(BERTH_Q_ARTIFACT_GET,
      "SELECT " ARTIFACT_JSON "::text FROM repositories r JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1::text "
      "AND (m.digest = $2::text OR m.id = (SELECT t.manifest_id FROM tags t WHERE t.repository_id = r.id AND t.name = $2::text))",
      2),
    /* $1 repository, $2 digest, $3 limit, $4 offset, $5 sort */
    Q(BERTH_Q_TAGS_LIST,
      "WITH f AS (SELECT t.*, m.id AS artifact_id FROM repositories r JOIN manifests m ON m.repository_id = r.id JOIN tags t "
      "ON t.manifest_id = m.id WHERE r.name = $1::text AND m.digest = $2::text) " PAGE(
          "json_build_object('name', x.name, 'repository_id', x.repository_id, 'artifact_id', x.artifact_id, 'push_time', x.updated_at)",
          "x", SORT_BY("$5", "name", "name") SORT_BY("$5", "push_time", "updated_at") "name", "$3", "$4"),
      5),
    /* $1 repository, $2 digest, $3 tag: "1" when created, "0" when the artifact is unknown */
    Q(BERTH_Q_TAG_CREATE,
      "WITH i AS (INSERT INTO tags (repository_id, name, manifest_id) SELECT r.id, $3::text, m.id FROM repositories r "
      "JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1::text AND m.digest = $2::text RETURNING 1), "
      "n AS (SELECT pg_notify('berth_invalidate', $1::text) FROM i) SELECT (SELECT count(*) FROM i)::text, "
      "(SELECT count(*) FROM n)",
      3),
    /* $1 username substring, $2 limit, $3 offset, $4 sort */
    Q(BERTH_Q_USERS_LIST,
      "WITH f AS (SELECT u.* FROM users u WHERE $1::text IS NULL OR strpos(u.username, $1::text) > 0) " PAGE(
          USER_JSON, "u",
          SORT_BY("$4", "username", "username") SORT_BY("$4", "user_id", "id") SORT_BY("$4", "email", "email")
              SORT_BY("$4", "creation_time", "created_at") SORT_BY("$4", "update_time", "updated_at") "username",
          "$2", "$3"),
      4),
    Q(BERTH_Q_USERS_SEARCH,
      "WITH f AS (SELECT u.id, u.username FROM users u WHERE u.disabled = false AND ($1::text IS NULL OR "
      "strpos(u.username, $1::text) > 0)) " PAGE("json_build_object('user_id', u.id, 'username', u.username)", "u",
                                                 SORT_BY("$4", "username", "username") SORT_BY("$4", "user_id", "id") "username",
                                                 "$2", "$3"),
      4),
    Q(BERTH_Q_USER_GET, "SELECT " USER_JSON "::text FROM users u WHERE u.id = $1::bigint", 1),
    /* $1 username, $2 hash, $3 email, $4 realname, $5 comment */
    Q(BERTH_Q_USER_CREATE,
      "INSERT INTO users (username, password_hash, email, realname, comment) VALUES ($1::text, $2::text, "
      "coalesce($3::text, ''), coalesce($4::text, ''), coalesce($5::text, '')) RETURNING json_build_object('user_id', id)::text",
      5),
    /* $1 id, $2 email, $3 realname, $4 comment (NULL keeps) */
    Q(BERTH_Q_USER_UPDATE,
      "UPDATE users SET email = coalesce($2::text, email), realname = coalesce($3::text, realname), comment = "
      "coalesce($4::text, comment), updated_at = now() WHERE id = $1::bigint",
      4),
    /* $1 id, $2 hash: the user's browser sessions end with the old password (refresh tokens no longer match it).
     * Never for an LDAP user (a CHECK constraint says so too): no row, so the caller answers 404. */
    Q(BERTH_Q_USER_PASSWORD,
      "WITH s AS (DELETE FROM sessions WHERE user_id = $1::bigint AND EXISTS (SELECT 1 FROM users WHERE id = $1::bigint "
      "AND ldap_dn IS NULL)) UPDATE users SET password_hash = $2::text, updated_at = now() WHERE id = $1::bigint AND ldap_dn IS NULL",
      2),
    Q(BERTH_Q_USER_IS_LDAP, "SELECT to_json(ldap_dn IS NOT NULL)::text FROM users WHERE id = $1::bigint", 1),
    Q(BERTH_Q_USER_SYSADMIN, "UPDATE users SET sysadmin = $2::bool, updated_at = now() WHERE id = $1::bigint", 2),
    Q(BERTH_Q_USER_DELETE, "DELETE FROM users WHERE id = $1::bigint RETURNING to_json(username)::text", 1),
    /* $1 project id (NULL: every robot), $2 level, $3 limit, $4 offset, $5 sort */
    Q(BERTH_Q_ROBOTS_LIST,
      "WITH f AS (SELECT r.* FROM robots r WHERE ($1::bigint IS NULL OR r.project_id = $1::bigint) AND ($2::text IS NULL "
      "OR r.level = $2::text)) " PAGE(ROBOT_JSON, "r",
                                      SORT_BY("$5", "id", "id") SORT_BY("$5", "name", "name")
                                          SORT_BY("$5", "creation_time", "created_at") SORT_BY("$5", "update_time", "updated_at")
                                              SORT_BY("$5", "expires_at", "expires_at") "id",
                                      "$3", "$4"),
      5),
    Q(BERTH_Q_ROBOT_GET, "SELECT " ROBOT_JSON "::text FROM robots r WHERE r.id = $1::bigint", 1),
    /* $1 full name, $2 description, $3 level, $4 project id, $5 secret sha256 hex, $6 duration days (-1 never), $7 creator */
    Q(BERTH_Q_ROBOT_CREATE,
      "INSERT INTO robots (name, description, level, project_id, secret_sha256, expires_at, creator) VALUES ($1::text, "
      "coalesce($2::text, ''), $3::text, $4::bigint, decode($5::text, 'hex'), CASE WHEN $6::int < 0 THEN NULL ELSE now() + "
      "make_interval(days => $6::int) END, $7::text) RETURNING json_build_object('id', id, 'name', name, 'creation_time', "
      "created_at, 'expires_at', coalesce(extract(epoch FROM expires_at)::bigint, -1))::text",
      7),
    Q(BERTH_Q_ROBOT_PERMS_CLEAR, "DELETE FROM robot_permissions WHERE robot_id = $1::bigint", 1),
    /* $1 robot id, $2 [{namespace, resource, action}] */
    Q(BERTH_Q_ROBOT_PERMS_ADD,
      "INSERT INTO robot_permissions (robot_id, namespace, resource, action) SELECT DISTINCT $1::bigint, x.namespace, "
      "x.resource, x.action FROM json_to_recordset($2::json) AS x(namespace text, resource text, action text)",
      2),
    /* $1 id, $2 description, $3 disable, $4 duration days (NULL keeps, -1 never) */
    Q(BERTH_Q_ROBOT_UPDATE,
      "UPDATE robots SET description = coalesce($2::text, description), disabled = coalesce($3::bool, disabled), "
      "expires_at = CASE WHEN $4::int IS NULL THEN expires_at WHEN $4::int < 0 THEN NULL ELSE created_at + "
      "make_interval(days => $4::int) END, updated_at = now() WHERE id = $1::bigint",
      4),
    Q(BERTH_Q_ROBOT_SECRET, "UPDATE robots SET secret_sha256 = decode($2::text, 'hex'), updated_at = now() WHERE id = $1::bigint",
      2),
    Q(BERTH_Q_ROBOT_DELETE, "DELETE FROM robots WHERE id = $1::bigint RETURNING to_json(name)::text", 1),
    /* $1 uid, $2 admin, $3 project id, $4 operation, $5 resource type, $6 username, $7 resource substring, $8 limit,
     * $9 offset, $10 sort. Without a project, non-admins see the projects they administer. */
    Q(BERTH_Q_AUDIT_LIST,
      "WITH f AS (SELECT a.* FROM audit_log a WHERE ($3::bigint IS NULL OR a.project_id = $3::bigint) AND ($2::bool OR "
      "$3::bigint IS NOT NULL OR berth_member_role(a.project_id, $1::bigint) = 1) AND ($4::text IS NULL OR a.operation = $4::text) AND ($5::text IS NULL OR a.resource_type = "
      "$5::text) AND ($6::text IS NULL OR a.username = $6::text) AND ($7::text IS NULL OR strpos(a.resource, $7::text) > 0)) " PAGE(
          "json_build_object('id', x.id, 'username', x.username, 'resource', x.resource, 'resource_type', "
          "x.resource_type, 'operation', x.operation, 'op_time', x.op_time, 'remote', x.remote, 'result', x.result, "
          "'detail', x.detail, 'count', x.count)",
          "x",
          SORT_BY("$10", "op_time", "op_time") SORT_BY("$10", "id", "id") SORT_BY("$10", "username", "username")
              SORT_BY("$10", "operation", "operation") SORT_BY("$10", "resource", "resource")
                  SORT_BY("$10", "resource_type", "resource_type") "id DESC",
          "$8", "$9"),
      10),
    /* $1 uid, $2 admin, $3 robot, $4 substring */
    Q(BERTH_Q_SEARCH,
      "SELECT json_build_object('project', coalesce((SELECT json_agg(" PROJECT_JSON(
          "$1",
          "$3") " ORDER BY p.name) FROM "
                "(SELECT * FROM projects p WHERE " VISIBLE(
                    "p") " AND strpos(p.name, $4::text) > 0 ORDER BY p.name LIMIT 100) p), '[]'), "
                         "'repository', coalesce((SELECT json_agg(json_build_object('project_id', x.project_id, 'project_name', x.pname, "
                         "'project_public', x.public, 'repository_name', x.name, 'pull_count', x.pull_count) ORDER BY x.name) FROM "
                         "(SELECT r.*, p.name AS pname, p.public FROM repositories r JOIN projects p ON p.id = r.project_id WHERE " VISIBLE(
                             "p") " AND strpos(r.name, $4::text) > 0 ORDER BY r.name LIMIT 100) x), '[]'))::text",
      4),
    Q(BERTH_Q_PING, "SELECT '\"ok\"'::text", 0),
    /* $1 name substring, $2 limit, $3 offset, $4 sort */
    Q(BERTH_Q_USERGROUPS_LIST,
      "WITH f AS (SELECT g.* FROM user_groups g WHERE $1::text IS NULL OR strpos(g.group_name, $1::text) > 0) " PAGE(
          USERGROUP_JSON, "g", SORT_BY("$4", "group_name", "group_name") SORT_BY("$4", "id", "id") "group_name", "$2", "$3"),
      4),
    Q(BERTH_Q_USERGROUP_GET, "SELECT " USERGROUP_JSON "::text FROM user_groups g WHERE g.id = $1::bigint", 1),
    /* $1 name, $2 normalized DN: the group for that DN, created if new */
    Q(BERTH_Q_USERGROUP_ENSURE,
      "WITH i AS (INSERT INTO user_groups (group_name, ldap_group_dn) VALUES ($1::text, $2::text) ON CONFLICT "
      "(ldap_group_dn) DO NOTHING RETURNING id) SELECT json_build_object('id', id)::text FROM (SELECT id FROM i UNION ALL "
      "SELECT id FROM user_groups WHERE ldap_group_dn = $2::text) x LIMIT 1",
      2),
    Q(BERTH_Q_USERGROUP_UPDATE, "UPDATE user_groups SET group_name = $2::text WHERE id = $1::bigint", 2),
    Q(BERTH_Q_USERGROUP_DELETE, "DELETE FROM user_groups WHERE id = $1::bigint RETURNING to_json(group_name)::text", 1),
    /* $1 username (an LDAP import: the user exists with no local password) */
    Q(BERTH_Q_USER_IMPORTED, "SELECT to_json(id)::text FROM users WHERE username = $1::text", 1),
    /* ---- web UI (issue #11) ---- */
    /* $1 repository, $2 digest or tag: the manifest as stored (layers, config, annotations for the artifact page) */
    Q(BERTH_Q_ARTIFACT_MANIFEST,
      "SELECT convert_from(m.content, 'UTF8') FROM repositories r JOIN manifests m ON m.repository_id = r.id WHERE r.name = "
      "$1::text AND (m.digest = $2::text OR m.id = (SELECT t.manifest_id FROM tags t WHERE t.repository_id = r.id AND t.name = $2::text))",
      2),
    /* Harbor's /statistics over the projects the caller sees ($1 uid, $2 admin, $3 robot); storage counts each
       blob and manifest once however many repositories share it */
    Q(BERTH_Q_STATISTICS,
      "WITH p AS (SELECT p.id, p.public FROM projects p WHERE " VISIBLE(
          "p") "), r AS (SELECT r.id, p.public FROM "
               "repositories r JOIN p ON p.id = r.project_id) SELECT json_build_object('private_project_count', (SELECT count(*) "
               "FROM p WHERE NOT public), 'public_project_count', (SELECT count(*) FROM p WHERE public), 'total_project_count', "
               "(SELECT count(*) FROM p), 'private_repo_count', (SELECT count(*) FROM r WHERE NOT public), 'public_repo_count', "
               "(SELECT count(*) FROM r WHERE public), 'total_repo_count', (SELECT count(*) FROM r), 'total_storage_consumption', "
               "(SELECT coalesce(sum(b.size), 0) FROM blobs b WHERE b.digest IN (SELECT rb.digest FROM repository_blobs rb JOIN r ON "
               "r.id = rb.repository_id)) + (SELECT coalesce(sum(s.size), 0) FROM (SELECT DISTINCT m.digest, m.size FROM manifests m "
               "JOIN r ON r.id = m.repository_id) s))::text",
      3),
    /* storage per visible project, largest first ($4 limit): the bars of the statistics page */
    Q(BERTH_Q_STATS_STORAGE,
      "WITH p AS (SELECT p.id, p.name FROM projects p WHERE " VISIBLE(
          "p") "), u AS (SELECT p.name, (SELECT coalesce(sum(b.size), 0) "
               "FROM blobs b WHERE b.digest IN (SELECT rb.digest FROM repository_blobs rb JOIN repositories r ON r.id = rb.repository_id "
               "WHERE r.project_id = p.id)) + (SELECT coalesce(sum(s.size), 0) FROM (SELECT DISTINCT m.digest, m.size FROM manifests m "
               "JOIN repositories r ON r.id = m.repository_id WHERE r.project_id = p.id) s) AS storage, (SELECT count(*) FROM "
               "repositories r WHERE r.project_id = p.id) AS repos FROM p) SELECT coalesce(json_agg(json_build_object('project', "
               "name, 'storage', storage, 'repo_count', repos) ORDER BY storage DESC, name), '[]')::text FROM (SELECT * FROM u "
               "ORDER BY storage DESC, name LIMIT $4::int) u",
      4),
    /* pushes and pulls per day over the last $4 days from the audit log, in the projects the caller sees (system
       admins: all); days without events are zeros so the chart's x axis is even */
    Q(BERTH_Q_STATS_ACTIVITY,
      "WITH d AS (SELECT generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') - make_interval(days => $4::int - 1), "
      "date_trunc('day', now() AT TIME ZONE 'UTC'), interval '1 day') AS day), a AS (SELECT date_trunc('day', a.op_time AT "
      "TIME ZONE 'UTC') AS day, a.operation, sum(a.count) AS n FROM audit_log a WHERE a.op_time >= now() - make_interval(days => "
      "$4::int) AND a.operation IN ('push', 'pull') AND a.result = 'success' AND ($2::bool OR a.project_id IN (SELECT p.id "
      "FROM projects p WHERE " VISIBLE(
          "p") ")) GROUP BY 1, 2) SELECT json_agg(json_build_object('day', to_char(d.day, "
               "'YYYY-MM-DD'), 'push', coalesce((SELECT n FROM a WHERE a.day = d.day AND operation = 'push'), 0), 'pull', "
               "coalesce((SELECT n FROM a WHERE a.day = d.day AND operation = 'pull'), 0)) ORDER BY d.day)::text FROM d",
      4),
    /* the last $1 executions, oldest first: bytes moved and seconds taken (to now while running) for the
       throughput chart */
    Q(BERTH_Q_STATS_REPLICATION,
      "SELECT coalesce(json_agg(json_build_object('id', e.id, 'policy_id', e.policy_id, 'status', e.status, 'start_time', "
      "e.start_time, 'seconds', greatest(extract(epoch FROM coalesce(e.end_time, now()) - e.start_time), 0.001), 'bytes', "
      "(SELECT coalesce(sum(t.bytes_sent), 0) FROM replication_tasks t WHERE t.execution_id = e.id)) ORDER BY e.id), '[]')::text "
      "FROM (SELECT * FROM replication_executions ORDER BY id DESC LIMIT $1::int) e",
      1),
    /* $1 project id: Harbor's _deletable pre-check (only an empty project can be deleted) */
    Q(BERTH_Q_PROJECT_REPO_COUNT, "SELECT to_json(count(*))::text FROM repositories WHERE project_id = $1::bigint", 1),
    /* immutable tag rules (sql/immutable.c enforces them): $1 project id, $2 limit, $3 offset */
    Q(BERTH_Q_IMM_LIST,
      "WITH f AS (SELECT * FROM immutable_rules WHERE project_id = $1::bigint) " PAGE(IMMUTABLE_RULE_JSON, "x", "priority, id",
                                                                                      "$2", "$3"),
      3),
    /* $1 project id, $2 priority, $3 disabled, $4 scope_selectors, $5 tag_selectors: the id, or no row when all 15
     * slots are taken */
    Q(BERTH_Q_IMM_CREATE,
      "INSERT INTO immutable_rules (project_id, slot, priority, disabled, scope_selectors, tag_selectors) "
      "SELECT $1::bigint, s, $2::int, $3::bool, $4::jsonb, $5::jsonb FROM generate_series(1, 15) s WHERE NOT "
      "EXISTS (SELECT 1 FROM immutable_rules i WHERE i.project_id = $1::bigint AND i.slot = s) ORDER BY s LIMIT 1 "
      "RETURNING json_build_object('id', id)::text",
      5),
    /* $1 project id, $2 rule id, then as create */
    Q(BERTH_Q_IMM_UPDATE,
      "UPDATE immutable_rules SET priority = $3::int, disabled = $4::bool, scope_selectors = $5::jsonb, "
      "tag_selectors = $6::jsonb, updated_at = now() WHERE project_id = $1::bigint AND id = $2::bigint "
      "RETURNING id::text",
      6),
    Q(BERTH_Q_IMM_DELETE,
      "DELETE FROM immutable_rules WHERE project_id = $1::bigint AND id = $2::bigint RETURNING to_json(id::text)::text", 2),
    /* retention policies (the engine: registry/service/retention.c): $1 project id, $2 policy JSON, $3 cron ("" none) */
    Q(BERTH_Q_RET_CREATE,
      "INSERT INTO retention_policies (project_id, policy, cron) VALUES ($1::bigint, $2::jsonb, nullif($3::text, '')) "
      "RETURNING json_build_object('id', id)::text",
      3),
    /* $1 policy id: the policy as Harbor shows it */
    Q(BERTH_Q_RET_GET,
      "SELECT (r.policy || jsonb_build_object('id', r.id, 'scope', jsonb_build_object('level', 'project', 'ref', "
      "r.project_id)))::text FROM retention_policies r WHERE r.id = $1::bigint",
      1),
    Q(BERTH_Q_RET_PROJECT,
      "SELECT to_json(p.name)::text FROM retention_policies r JOIN projects p ON p.id = r.project_id WHERE r.id = $1::bigint", 1),
    Q(BERTH_Q_RET_UPDATE,
      "UPDATE retention_policies SET policy = $2::jsonb, cron = nullif($3::text, ''), updated_at = now() WHERE id = $1::bigint "
      "RETURNING id::text",
      3),
    Q(BERTH_Q_RET_DELETE, "DELETE FROM retention_policies WHERE id = $1::bigint RETURNING to_json(id::text)::text", 1),
    /* $1 policy id, $2 dry run */
    Q(BERTH_Q_RET_EXEC_CREATE,
      "INSERT INTO retention_executions (policy_id, trigger, dry_run) SELECT id, 'MANUAL', $2::bool FROM retention_policies "
      "WHERE id = $1::bigint RETURNING json_build_object('id', id)::text",
      2),
    /* $1 policy id, $2 limit, $3 offset: newest first */
    Q(BERTH_Q_RET_EXEC_LIST,
      "WITH f AS (SELECT * FROM retention_executions WHERE policy_id = $1::bigint) " PAGE(RET_EXEC_JSON, "x", "id DESC", "$2",
                                                                                          "$3"),
      3),
    /* $1 policy id, $2 execution id: a queued run ends at once, a running one at its next repository */
    Q(BERTH_Q_RET_EXEC_STOP,
      "UPDATE retention_executions SET stop_requested = true, status = CASE WHEN status = 'Pending' THEN 'Stopped' ELSE status "
      "END, end_time = CASE WHEN status = 'Pending' THEN now() ELSE end_time END WHERE policy_id = $1::bigint AND id = "
      "$2::bigint RETURNING id::text",
      2),
    /* $1 policy id, $2 execution id, $3 limit, $4 offset */
    Q(BERTH_Q_RET_TASK_LIST,
      "WITH f AS (SELECT t.* FROM retention_tasks t JOIN retention_executions e ON e.id = t.execution_id WHERE e.policy_id = "
      "$1::bigint AND e.id = $2::bigint) " PAGE(RET_TASK_JSON, "x", "id", "$3", "$4"),
      4),
    /* $1 policy id, $2 execution id, $3 task id */
    Q(BERTH_Q_RET_TASK_LOG,
      "SELECT to_json(t.log)::text FROM retention_tasks t JOIN retention_executions e ON e.id = t.execution_id WHERE "
      "e.policy_id = $1::bigint AND e.id = $2::bigint AND t.id = $3::bigint",
      3),
};

int berth_db_api(berth_dbconn_t *c, berth_q_t q, const char *const *params, berth_db_json_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    out->total = -1;
    /* only the JSON-shaped queries: another file's statement would answer in another shape */
    if ((unsigned)q >= BERTH_SQL__COUNT ||
        (berth_db__api_stmts[q].sql == NULL && berth_db__replication_stmts[q].sql == NULL && berth_db__gc_stmts[q].sql == NULL &&
         berth_db__gateway_stmts[q].sql == NULL &&
         (berth_db__webhook_stmts[q].sql == NULL || strncmp(berth_sql_name((int)q), "BERTH_Q_", 8) != 0))) {
        berth_log_err("sql: %d (%s) is not a REST query", (int)q, berth_sql_name((int)q));
        return berth_err_set(err, BERTH_OCI_INTERNAL, "unknown query %d", (int)q);
    }
    PGresult *res = berth_db__run(c, q, params, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    const char *aff = PQcmdTuples(res);
    out->affected = aff[0] != '\0' ? strtol(aff, NULL, 10) : 0;
    if (PQntuples(res) >= 1 && PQnfields(res) >= 1 && !PQgetisnull(res, 0, 0))
        out->json = strdup(PQgetvalue(res, 0, 0));
    if (PQntuples(res) >= 1 && PQnfields(res) >= 2 && !PQgetisnull(res, 0, 1))
        out->total = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return 0;
}
