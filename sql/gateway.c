/* The HPC image gateway's statements: project settings, the sqfs_jobs queue (claims with a lease), results. */
#include "sql/gateway.h"

#include "sql/db_internal.h"

const berth_db__stmt_t berth_db__gateway_stmts[BERTH_SQL__COUNT] = {
    /* $1 repository: its project's hpc_squashfs and hpc_squashfs_tags */
    BERTH_DB__STMT(BERTH_Q_SQFS_MODE,
                   "SELECT json_build_object('mode', p.hpc_squashfs, 'tags', p.hpc_squashfs_tags)::text FROM projects p "
                   "WHERE p.name = split_part($1::text, '/', 1)",
                   1),
    /* $1 repository, $2 manifest digest: a job unless one exists (idempotent per manifest); "1" when created */
    BERTH_DB__STMT(BERTH_Q_SQFS_ENSURE,
                   "WITH ins AS (INSERT INTO sqfs_jobs (repository_id, digest) SELECT r.id, $2::text FROM repositories r "
                   "WHERE r.name = $1::text ON CONFLICT (repository_id, digest) DO NOTHING RETURNING id) "
                   "SELECT count(*)::text FROM ins",
                   2),
    /* $1 instance, $2 lease seconds: the oldest runnable job (queued and due, or running with its lease run out) */
    BERTH_DB__STMT(BERTH_Q_SQFS_CLAIM,
                   "UPDATE sqfs_jobs j SET status = 'running', claimed_by = $1::text, lease_until = now() + "
                   "make_interval(secs => $2::int), attempts = j.attempts + 1, progress = 0, updated_at = now() "
                   "WHERE j.id = (SELECT id FROM sqfs_jobs WHERE (status = 'queued' AND not_before <= now()) OR "
                   "(status = 'running' AND lease_until < now()) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                   "RETURNING json_build_object('id', j.id, 'repository', (SELECT r.name FROM repositories r WHERE r.id = "
                   "j.repository_id), 'digest', j.digest, 'attempts', j.attempts)::text",
                   2),
    /* $1 id, $2 instance, $3 progress 0..1, $4 lease seconds: "true" while the claim is still ours */
    BERTH_DB__STMT(BERTH_Q_SQFS_PROGRESS,
                   "UPDATE sqfs_jobs SET progress = $3::real, lease_until = now() + make_interval(secs => $4::int), "
                   "updated_at = now() WHERE id = $1::bigint AND claimed_by = $2::text AND status = 'running' RETURNING 'true'",
                   4),
    /* $1 id, $2 instance, $3 the result as JSON */
    BERTH_DB__STMT(BERTH_Q_SQFS_DONE,
                   "UPDATE sqfs_jobs SET status = 'done', progress = 1, reason = '', lease_until = NULL, artifact_digest = "
                   "$3::jsonb->>'artifact_digest', blob_digest = $3::jsonb->>'digest', size = ($3::jsonb->>'size')::bigint, "
                   "content_bytes = ($3::jsonb->>'uncompressed_size')::bigint, compression = $3::jsonb->>'compression', "
                   "isa_level = $3::jsonb->>'isa_level', published_path = $3::jsonb->>'published_path', seconds = "
                   "($3::jsonb->>'seconds')::real, updated_at = now() WHERE id = $1::bigint AND claimed_by = $2::text "
                   "RETURNING 'true'",
                   3),
    /* $1 id, $2 instance, $3 reason, $4 retry?, $5 attempts allowed: queued again after 2^attempts s, or failed */
    BERTH_DB__STMT(BERTH_Q_SQFS_FAIL,
                   "UPDATE sqfs_jobs SET status = CASE WHEN $4::bool AND attempts < $5::int THEN 'queued' ELSE 'failed' END, "
                   "not_before = now() + make_interval(secs => least(300, power(2, attempts))::int), reason = $3::text, "
                   "lease_until = NULL, updated_at = now() WHERE id = $1::bigint AND claimed_by = $2::text RETURNING status",
                   5),
    /* $1 instance: a restarted berthd takes its own running jobs back at once (others' wait for their lease) */
    BERTH_DB__STMT(BERTH_Q_SQFS_RESET,
                   "UPDATE sqfs_jobs SET status = 'queued', lease_until = NULL, not_before = now() WHERE status = 'running' "
                   "AND claimed_by = $1::text",
                   1),
    /* $1 repository, $2 manifest digest */
    BERTH_DB__STMT(BERTH_Q_SQFS_GET,
                   "SELECT " BERTH_SQL_SQFS_JOB_JSON "::text FROM sqfs_jobs j JOIN repositories r ON r.id = j.repository_id "
                   "WHERE r.name = $1::text AND j.digest = $2::text",
                   2),
    /* $1 repository, $2 a deleted manifest (the source or the squashfs artifact): the job goes; its published path */
    BERTH_DB__STMT(BERTH_Q_SQFS_FORGET,
                   "WITH d AS (DELETE FROM sqfs_jobs j USING repositories r WHERE r.id = j.repository_id AND r.name = $1::text "
                   "AND (j.digest = $2::text OR j.artifact_digest = $2::text) RETURNING j.digest, j.published_path) "
                   "SELECT coalesce(json_agg(json_build_object('digest', digest, 'path', published_path)), '[]')::text FROM d",
                   2),
    /* jobs by status, for /metrics */
    BERTH_DB__STMT(BERTH_Q_SQFS_COUNTS,
                   "SELECT coalesce(json_object_agg(status, n), '{}')::text FROM (SELECT status, count(*) AS n FROM sqfs_jobs "
                   "GROUP BY status) x",
                   0),
    /* $1 repository, $2 manifest digest: the ISA level an index declares for it ("" when none) */
    BERTH_DB__STMT(BERTH_Q_SQFS_LEVEL,
                   "SELECT to_json(coalesce((SELECT v.level FROM isa_variants v JOIN manifests m ON m.id = v.manifest_id "
                   "JOIN repositories r ON r.id = m.repository_id WHERE r.name = $1::text AND v.digest = $2::text "
                   "ORDER BY v.level LIMIT 1), ''))::text",
                   2),
    /* $1 hours: tags of converting-on-push projects set within the window whose manifest has no job, itself or (an
     * index) any child: pushes whose in-memory hand-off a crash lost. [[repo, tag, digest], ...], newest first */
    BERTH_DB__STMT(BERTH_Q_SQFS_MISSED,
                   "SELECT coalesce(json_agg(json_build_array(x.repo, x.tag, x.digest)), '[]')::text FROM (SELECT r.name AS "
                   "repo, t.name AS tag, m.digest FROM projects p JOIN repositories r ON r.project_id = p.id JOIN tags t ON "
                   "t.repository_id = r.id JOIN manifests m ON m.id = t.manifest_id WHERE p.hpc_squashfs = 'push' AND "
                   "t.updated_at > now() - make_interval(hours => $1::int) AND NOT EXISTS (SELECT 1 FROM sqfs_jobs j WHERE "
                   "j.repository_id = r.id AND (j.digest = m.digest OR j.digest IN (SELECT x.digest FROM manifest_refs x WHERE "
                   "x.manifest_id = m.id AND x.kind = 1))) ORDER BY t.updated_at DESC LIMIT 1000) x",
                   1),
};
