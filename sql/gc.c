/*
 * Garbage collection's SQL (issue 13): runs, the schedule, marking and sweeping. Every statement has the REST
 * queries' shape (sql/api.h: one row, JSON text first) and runs through berth_db_api(), for the REST API
 * (registry/api/gc.c) and the collector (registry/service/gc.c).
 *
 * The rule these statements implement (README "Garbage collection"): a sweep first locks the rows of one batch
 * FOR UPDATE SKIP LOCKED (a row a manifest PUT, a mount or an upload holds FOR KEY SHARE is skipped), then, in a
 * second statement of the same transaction, so with a snapshot taken after the locks were granted, deletes only
 * the rows that are still unreferenced and have been for longer than the grace window. Parameters: $grace is
 * gc.grace_seconds, $run the run id, $marks the run whose marks are worked through, $owner the lease holder.
 */
#include "sql/gc.h"

#include "sql/db_internal.h"
#include "sql/page.h"

/* older than the window: created before it and no release within it */
#define GRACE(g) "now() - make_interval(secs => " g "::int)"
#define NOT_RELEASED(rid, dg, g)                                                                                                   \
    "NOT EXISTS (SELECT 1 FROM gc_releases g WHERE g.repository_id = " rid " AND g.digest = " dg " AND g.at >= " GRACE(g) ")"

/* the counters every engine statement returns (after its own update) */
#define RUN_STATE                                                                                                                  \
    "json_build_object('status', u.status, 'phase', u.phase, 'cursor', u.cursor_id, 'manifests_marked', u.manifests_marked, "      \
    "'manifests_deleted', u.manifests_deleted, 'links_marked', u.links_marked, 'links_deleted', u.links_deleted, "                 \
    "'blobs_marked', u.blobs_marked, 'bytes_marked', u.bytes_marked, 'blobs_deleted', u.blobs_deleted, 'bytes_freed', "            \
    "u.bytes_freed, 'orphans', u.orphans_found, 'orphan_bytes', u.orphan_bytes, 'processed', u.processed)"

/* a heartbeat that also moves the lease on: only while this berthd holds it */
#define LEASE_OK(id, owner) "u.id = " id "::bigint AND u.lease_owner = " owner "::text"
#define LEASE_SET(lease) "lease_until = now() + make_interval(secs => " lease "::int), updated_at = now()"

/* Percentage: nine phases (0..8); in a sweep phase, the share of its marks processed so far */
#define PERCENT(r)                                                                                                                 \
    "CASE WHEN " r ".status = 'Success' THEN 100 ELSE least(99, " r ".phase * 100 / 9 + CASE " r ".phase WHEN 2 THEN " r           \
    ".processed * 11 / greatest(" r ".manifests_marked, 1) WHEN 4 THEN " r ".processed * 11 / greatest(" r                         \
    ".links_marked, 1) WHEN 6 THEN " r ".processed * 11 / greatest(" r ".blobs_marked, 1) ELSE 0 END) END"

#define PARAMS_JSON(r)                                                                                                             \
    "json_build_object('delete_untagged', " r ".delete_untagged, 'dry_run', " r ".dry_run, 'workers', " r ".workers)::text"

/* Harbor's GCHistory, plus Berth's progress */
#define RUN_JSON                                                                                                                          \
    "json_build_object('id', r.id, 'job_name', 'GARBAGE_COLLECTION', 'job_kind', r.kind, 'job_parameters', " PARAMS_JSON(                 \
        "r") ", 'job_status', CASE r.status WHEN 'Stopping' THEN 'Running' ELSE r.status END, 'deleted', false, 'schedule', "             \
             "json_build_object('type', CASE r.kind WHEN 'MANUAL' THEN 'Manual' ELSE (SELECT s.type FROM gc_schedule s) END), "           \
             "'creation_time', r.created_at, 'update_time', r.updated_at, 'start_time', r.started_at, 'end_time', r.finished_at, "        \
             "'resumed_from', r.resumed_from, 'grace_seconds', r.grace_seconds, 'error', r.error, 'progress', json_build_object("         \
             "'phase', r.phase, 'percent', " PERCENT(                                                                                     \
                 "r") ", 'stopping', r.status = 'Stopping', 'manifests_marked', r.manifests_marked, "                                     \
                      "'manifests_deleted', r.manifests_deleted, 'links_marked', r.links_marked, 'links_deleted', r.links_deleted, "      \
                      "'blobs_marked', r.blobs_marked, 'bytes_marked', r.bytes_marked, 'blobs_deleted', r.blobs_deleted, 'bytes_freed', " \
                      "r.bytes_freed, 'orphan_files', r.orphans_found, 'orphan_bytes', r.orphan_bytes))"

#define SCHEDULE_JSON                                                                                                              \
    "json_build_object('id', 1, 'job_name', 'GARBAGE_COLLECTION', 'job_kind', 'SCHEDULE', 'schedule', json_build_object("          \
    "'type', s.type, 'cron', s.cron), 'job_parameters', " PARAMS_JSON("s") ", 'creation_time', s.created_at, "                     \
                                                                           "'update_time', s.updated_at)"

/* The keep set of delete_untagged: tagged manifests and, transitively, their index children, their referrers
 * and the subjects of kept referrers (a kept signature keeps what it signs), all within one repository */
#define KEEP_CTE                                                                                                                   \
    "WITH RECURSIVE keep(id) AS (SELECT manifest_id FROM tags UNION SELECT n.id FROM keep k JOIN manifests km ON km.id = k.id "    \
    "CROSS JOIN LATERAL (SELECT c.id FROM manifest_refs x JOIN manifests c ON c.repository_id = km.repository_id AND c.digest = "  \
    "x.digest WHERE x.manifest_id = km.id AND x.kind = 1 UNION ALL SELECT s.id FROM manifests s WHERE s.repository_id = "          \
    "km.repository_id AND s.digest = km.subject_digest UNION ALL SELECT f.id FROM manifests f WHERE f.repository_id = "            \
    "km.repository_id AND f.subject_digest = km.digest) n) "

/* In a dry run nothing is deleted between the phases, so the later phases count what the earlier ones marked as
 * gone ($4 dry): a reference from a marked manifest, a marked link. A real run sees the deletions themselves. */
#define MARKED_MANIFEST(m)                                                                                                         \
    "EXISTS (SELECT 1 FROM gc_marks k WHERE k.run_id = $2::bigint AND k.kind = 1 AND k.repository_id = " m                         \
    ".repository_id AND k.digest = " m ".digest)"

/* the marks of one kind after the cursor: $1 marks, $2 cursor, $3 limit */
#define WINDOW(kind)                                                                                                               \
    "WITH w AS (SELECT id, repository_id, digest FROM gc_marks WHERE run_id = $1::bigint AND kind = " #kind " AND id > "           \
    "$2::bigint AND id <= $4::bigint ORDER BY id LIMIT $3::int) "

const berth_db__stmt_t berth_db__gc_stmts[BERTH_SQL__COUNT] = {
    /* ---- REST: history, runs, schedule ---- */
    /* $1 limit, $2 offset, $3 sort */
    BERTH_DB__STMT(BERTH_Q_GC_LIST,
                   "WITH f AS (SELECT * FROM gc_runs) " PAGE(RUN_JSON, "r",
                                                             SORT_BY("$3", "id", "id") SORT_BY("$3", "creation_time", "created_at")
                                                                 SORT_BY("$3", "update_time", "updated_at") "id DESC",
                                                             "$1", "$2"),
                   3),
    BERTH_DB__STMT(BERTH_Q_GC_GET, "SELECT " RUN_JSON "::text FROM gc_runs r WHERE r.id = $1::bigint", 1),
    BERTH_DB__STMT(BERTH_Q_GC_LOG, "SELECT to_json(log)::text FROM gc_runs WHERE id = $1::bigint", 1),
    /* $1 id: a pending run stops at once, a running one at its next batch */
    BERTH_DB__STMT(BERTH_Q_GC_STOP,
                   "UPDATE gc_runs SET status = CASE status WHEN 'Pending' THEN 'Stopped' ELSE 'Stopping' END, finished_at = "
                   "CASE status WHEN 'Pending' THEN now() END, updated_at = now(), log = log || CASE status WHEN 'Pending' THEN "
                   "to_char(now(), 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\" ') || 'stopped before it started' || chr(10) ELSE '' END "
                   "WHERE id = $1::bigint AND status IN ('Pending', 'Running') RETURNING json_build_object('id', id)::text",
                   1),
    /* $1 kind, $2 delete_untagged, $3 dry_run, $4 workers. A new run resumes the last run when that one was stopped
     * before it finished and asked for the same thing: it carries on from its phase and marks. 23505 (EEXISTS)
     * while another run is active. */
    BERTH_DB__STMT(
        BERTH_Q_GC_CREATE,
        "WITH prev AS (SELECT * FROM gc_runs p WHERE p.id = (SELECT max(id) FROM gc_runs) AND p.status = 'Stopped' AND "
        "p.started_at IS NOT NULL AND p.delete_untagged = $2::bool AND p.dry_run = $3::bool) INSERT INTO gc_runs (kind, "
        "delete_untagged, dry_run, workers, grace_seconds, marks_id, resumed_from, phase, cursor_id, processed, manifests_marked, "
        "manifests_deleted, links_marked, links_deleted, blobs_marked, bytes_marked, blobs_deleted, bytes_freed, log) SELECT "
        "$1::text, $2::bool, $3::bool, $4::int, prev.grace_seconds, prev.marks_id, prev.id, coalesce(prev.phase, 0), "
        "coalesce(prev.cursor_id, 0), coalesce(prev.processed, 0), coalesce(prev.manifests_marked, 0), "
        "coalesce(prev.manifests_deleted, 0), coalesce(prev.links_marked, 0), coalesce(prev.links_deleted, 0), "
        "coalesce(prev.blobs_marked, 0), coalesce(prev.bytes_marked, 0), coalesce(prev.blobs_deleted, 0), "
        "coalesce(prev.bytes_freed, 0), CASE WHEN prev.id IS NULL THEN '' ELSE to_char(now(), "
        "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\" ') || 'resumes run ' || prev.id || ' at phase ' || prev.phase || chr(10) END FROM "
        "(SELECT 1) one LEFT JOIN prev ON true RETURNING json_build_object('id', id)::text",
        4),
    BERTH_DB__STMT(BERTH_Q_GC_SCHEDULE_GET, "SELECT " SCHEDULE_JSON "::text FROM gc_schedule s WHERE s.id = 1", 0),
    /* $1 type, $2 cron, $3 delete_untagged, $4 dry_run, $5 workers */
    BERTH_DB__STMT(BERTH_Q_GC_SCHEDULE_PUT,
                   "INSERT INTO gc_schedule (id, type, cron, delete_untagged, dry_run, workers) VALUES (1, $1::text, $2::text, "
                   "$3::bool, $4::bool, $5::int) ON CONFLICT (id) DO UPDATE SET type = EXCLUDED.type, cron = EXCLUDED.cron, "
                   "delete_untagged = EXCLUDED.delete_untagged, dry_run = EXCLUDED.dry_run, workers = EXCLUDED.workers, "
                   "updated_at = now() RETURNING json_build_object('id', id)::text",
                   5),
    /* the schedule fired in this minute: one berthd wins the minute (last_fired), and creates the run */
    BERTH_DB__STMT(BERTH_Q_GC_SCHEDULE_FIRE,
                   "UPDATE gc_schedule SET last_fired = date_trunc('minute', now()) WHERE id = 1 AND type <> 'None' AND "
                   "last_fired IS DISTINCT FROM date_trunc('minute', now()) RETURNING " PARAMS_JSON("gc_schedule"),
                   0),

    /* ---- the collector ---- */
    /* $1 owner, $2 lease seconds, $3 grace: the oldest active run whose lease ran out (or is this berthd's) */
    BERTH_DB__STMT(
        BERTH_Q_GC_CLAIM,
        "UPDATE gc_runs u SET status = CASE WHEN u.status = 'Pending' THEN 'Running' ELSE u.status END, lease_owner = $1::text, " LEASE_SET(
            "$2") ", started_at = coalesce(u.started_at, now()), grace_seconds = coalesce(u.grace_seconds, $3::int), "
                  "marks_id = coalesce(u.marks_id, u.id) WHERE u.id = (SELECT id FROM gc_runs WHERE status IN ('Pending', "
                  "'Running', 'Stopping') AND (status = 'Pending' OR lease_until IS NULL OR lease_until < now() OR "
                  "lease_owner = $1::text) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING json_build_object('id', "
                  "u.id, 'dry_run', u.dry_run, 'delete_untagged', u.delete_untagged, 'workers', u.workers, 'marks', u.marks_id, 'grace', "
                  "u.grace_seconds, 'state', " RUN_STATE ")::text",
        3),
    /* $1 id, $2 owner, $3 lease: heartbeat; answers the status ('Stopping' asks the collector to stop) */
    BERTH_DB__STMT(BERTH_Q_GC_RENEW,
                   "UPDATE gc_runs u SET " LEASE_SET("$3") " WHERE " LEASE_OK("$1", "$2") " RETURNING " RUN_STATE "::text", 3),
    /* $1 id, $2 owner, $3 lease, $4 next phase, $5 log line (may be '') */
    BERTH_DB__STMT(BERTH_Q_GC_PHASE,
                   "UPDATE gc_runs u SET phase = $4::int, cursor_id = 0, processed = 0, log = u.log || $5::text, " LEASE_SET(
                       "$3") " WHERE " LEASE_OK("$1", "$2") " RETURNING " RUN_STATE "::text",
                   5),
    /* $1 id, $2 owner, $3 log line */
    BERTH_DB__STMT(BERTH_Q_GC_NOTE,
                   "UPDATE gc_runs u SET log = u.log || $3::text WHERE " LEASE_OK("$1", "$2") " RETURNING " RUN_STATE "::text", 3),
    /* $1 id, $2 owner, $3 final status, $4 log line, $5 error or NULL. Marks are dropped once a run finished (a
     * stopped run keeps them for the run that resumes it) */
    BERTH_DB__STMT(
        BERTH_Q_GC_END,
        "WITH drop AS (DELETE FROM gc_marks WHERE $3::text <> 'Stopped' AND run_id IN (SELECT x.id FROM gc_runs x WHERE x.id <= "
        "(SELECT marks_id FROM gc_runs WHERE id = $1::bigint))) UPDATE gc_runs u SET status = $3::text, log = u.log || $4::text, "
        "error = $5::text, finished_at = now(), updated_at = now(), lease_owner = NULL, lease_until = NULL WHERE " LEASE_OK(
            "$1", "$2") " RETURNING " RUN_STATE "::text",
        5),
    /* $1 id, $2 owner: berthd stops; the next start (or another berthd) resumes the run without waiting for the lease */
    BERTH_DB__STMT(BERTH_Q_GC_LEAVE,
                   "UPDATE gc_runs u SET lease_until = now() - interval '1 second' WHERE " LEASE_OK(
                       "$1", "$2") " RETURNING " RUN_STATE "::text",
                   2),

    /* ---- marking: one INSERT ... SELECT per kind, committed together with the move to the next phase ---- */
    /* $1 run, $2 marks, $3 grace, $4 dry, $5 owner (the run row is updated only while this berthd holds it). Untagged
     * manifests outside the keep set */
    BERTH_DB__STMT(
        BERTH_Q_GC_MARK_MANIFESTS,
        KEEP_CTE ", ins AS (INSERT INTO gc_marks (run_id, kind, repository_id, digest, size) SELECT $2::bigint, 1, "
                 "m.repository_id, m.digest, m.size FROM manifests m WHERE NOT EXISTS (SELECT 1 FROM keep WHERE keep.id "
                 "= m.id) AND m.created_at < " GRACE("$3") " AND " NOT_RELEASED(
                     "m.repository_id", "m.digest",
                     "$3") " ORDER BY m.repository_id, m.id RETURNING size) UPDATE gc_runs u SET manifests_marked = (SELECT "
                           "count(*) FROM ins), phase = CASE WHEN $4::bool THEN 3 ELSE 2 END, cursor_id = 0, processed = 0, "
                           "updated_at = now() WHERE u.id = $1::bigint AND u.lease_owner = $5::text RETURNING " RUN_STATE "::text",
        5),
    /* links no manifest of their repository lists */
    BERTH_DB__STMT(
        BERTH_Q_GC_MARK_LINKS,
        "WITH ins AS (INSERT INTO gc_marks (run_id, kind, repository_id, digest) SELECT $2::bigint, 2, rb.repository_id, rb.digest "
        "FROM repository_blobs rb WHERE rb.created_at < " GRACE("$3") " AND " NOT_RELEASED(
            "rb.repository_id", "rb.digest",
            "$3") " AND NOT EXISTS (SELECT 1 FROM manifest_refs x JOIN manifests m ON m.id = x.manifest_id WHERE x.digest = "
                  "rb.digest AND m.repository_id = rb.repository_id AND NOT ($4::bool AND " MARKED_MANIFEST(
                      "m") ")) ORDER BY rb.repository_id, rb.digest RETURNING 1) UPDATE gc_runs u SET links_marked = (SELECT "
                           "count(*) FROM ins), phase = CASE WHEN $4::bool THEN 5 ELSE 4 END, cursor_id = 0, processed = 0, "
                           "updated_at = now() WHERE u.id = $1::bigint AND u.lease_owner = $5::text RETURNING " RUN_STATE "::text",
        5),
    /* blobs no repository links and no manifest lists */
    BERTH_DB__STMT(
        BERTH_Q_GC_MARK_BLOBS,
        "WITH ins AS (INSERT INTO gc_marks (run_id, kind, repository_id, digest, size) SELECT $2::bigint, 3, 0, b.digest, b.size "
        "FROM blobs b WHERE b.created_at < " GRACE(
            "$3") " AND NOT EXISTS (SELECT 1 FROM repository_blobs rb WHERE rb.digest = "
                  "b.digest AND NOT ($4::bool AND EXISTS (SELECT 1 FROM gc_marks k WHERE "
                  "k.run_id = $2::bigint AND k.kind = 2 AND k.repository_id = "
                  "rb.repository_id AND k.digest = rb.digest))) AND NOT EXISTS (SELECT 1 "
                  "FROM manifest_refs x JOIN manifests m ON m.id = x.manifest_id WHERE "
                  "x.digest = b.digest AND x.kind = 0 AND NOT ($4::bool AND " MARKED_MANIFEST(
                      "m") ")) ORDER BY b.digest RETURNING size) UPDATE gc_runs u SET "
                           "blobs_marked = (SELECT count(*) FROM ins), bytes_marked = "
                           "(SELECT coalesce(sum(size), 0) FROM ins), phase = CASE WHEN "
                           "$4::bool THEN 7 ELSE 6 END, cursor_id = 0, processed = 0, "
                           "updated_at = now() WHERE u.id = $1::bigint AND u.lease_owner = $5::text RETURNING " RUN_STATE "::text",
        5),
    /* $1 marks, $2 kind, $3 limit: up to 1000 marked digests, for the log of a dry run */
    BERTH_DB__STMT(BERTH_Q_GC_MARKED,
                   "SELECT coalesce(json_agg(json_build_object('digest', digest, 'size', size) ORDER BY id), '[]')::text FROM "
                   "(SELECT id, digest, size FROM gc_marks WHERE run_id = $1::bigint AND kind = $2::int ORDER BY id LIMIT "
                   "$3::int) k",
                   3),

    /* ---- sweeping, one batch = lock (first statement) + delete (second) + commit ---- */
    /* $1 marks, $2 kind, $3 after, $4 size: the ids that end each full window of `size` marks after `after`, in
     * order (the sweep's windows, handed to its connections; what follows the last one is the last window) */
    BERTH_DB__STMT(BERTH_Q_GC_WINDOWS,
                   "SELECT coalesce(json_agg(id ORDER BY id), '[]')::text FROM (SELECT id, row_number() OVER (ORDER BY id) AS "
                   "n FROM gc_marks WHERE run_id = $1::bigint AND kind = $2::int AND id > $3::bigint) s WHERE n % $4::int = 0",
                   4),
    /* $1 marks, $2 after, $3 limit, $4 last id: the window of marks in (after, last] and the rows of it locked now (skipping
     * those another transaction holds), as an array literal for the sweep. Manifests: also the quota_blobs rows of
     * every charge the locked manifests hold (the manifest's own digest and its layers, in its project), FOR UPDATE
     * SKIP LOCKED; only the manifests all of whose charge rows were got are returned. A charger or a release in
     * progress on one of them holds that row (0205_quota_releases.sql), so the manifest is skipped, as a manifest
     * row another transaction holds is; the batch takes no quota row and waits for nobody. (NOT IN: a hashed
     * sub-plan; the planner's nested-loop anti-join over the CTEs took 370 ms a batch.) */
    BERTH_DB__STMT(
        BERTH_Q_GC_LOCK_MANIFESTS,
        WINDOW(
            1) ", l AS MATERIALIZED (SELECT m.id, r.project_id, m.digest FROM manifests m JOIN w ON w.repository_id = "
               "m.repository_id AND w.digest = m.digest JOIN repositories r ON r.id = m.repository_id ORDER BY m.id FOR UPDATE "
               "OF m SKIP LOCKED), c AS MATERIALIZED (SELECT l.id, l.project_id, l.digest FROM l UNION SELECT l.id, "
               "l.project_id, x.digest FROM l JOIN manifest_refs x ON x.manifest_id = l.id AND x.kind = 0), h AS MATERIALIZED "
               "(SELECT qb.project_id, qb.digest FROM (SELECT DISTINCT project_id, digest FROM c) p JOIN quota_blobs qb ON "
               "qb.project_id = p.project_id AND qb.digest = p.digest FOR UPDATE OF qb SKIP LOCKED), miss AS (SELECT c.id FROM c "
               "WHERE (c.project_id, c.digest) NOT IN (SELECT h.project_id, h.digest FROM h) AND EXISTS (SELECT 1 "
               "FROM quota_blobs qb WHERE qb.project_id = c.project_id AND qb.digest = c.digest)) SELECT json_build_object('hi', "
               "(SELECT max(id) FROM w), 'n', (SELECT count(*) FROM w), 'locked', (SELECT array_agg(l.id ORDER BY l.id)::text "
               "FROM l WHERE l.id NOT IN (SELECT id FROM miss)))::text",
        4),
    BERTH_DB__STMT(
        BERTH_Q_GC_LOCK_LINKS,
        WINDOW(2) "SELECT json_build_object('hi', (SELECT max(id) FROM w), 'n', (SELECT count(*) FROM w), 'locked', "
                  "(SELECT array_agg(l.p)::text FROM (SELECT rb.repository_id || '/' || rb.digest AS p FROM repository_blobs rb "
                  "JOIN w ON w.repository_id = rb.repository_id AND w.digest = rb.digest ORDER BY rb.repository_id, rb.digest "
                  "FOR UPDATE OF rb SKIP LOCKED) l))::text",
        4),
    /* Blobs: the rows, then each one's blob-file lock for this session, tried (an upload placing the file holds it
     * shared until its row commits: that blob is skipped, and nothing waits, so no upload waiting for a locked row
     * while holding its file lock can deadlock with the sweep). Held across the commit until the files are unlinked
     * (BERTH_Q_GC_FILES_UNLOCK): an upload cannot place a file again between the row's deletion and its unlink. */
    BERTH_DB__STMT(BERTH_Q_GC_LOCK_BLOBS,
                   WINDOW(3) ", l AS MATERIALIZED (SELECT b.digest FROM blobs b JOIN w ON w.digest = b.digest ORDER BY b.digest "
                             "FOR UPDATE OF b SKIP LOCKED), f AS MATERIALIZED (SELECT l.digest FROM l WHERE "
                             "pg_try_advisory_lock(" BERTH_DB__BLOB_FILE_LOCK_CLASS ", hashtext(l.digest))) SELECT "
                             "json_build_object('hi', (SELECT max(id) FROM w), 'n', (SELECT count(*) FROM w), 'locked', "
                             "(SELECT array_agg(f.digest)::text FROM f))::text",
                   4),
    /* The deletions of a batch: they return what went and update no shared row, so the sweepers' trigger work (the
     * cascades, the quota release) runs in parallel; BERTH_Q_GC_PROGRESS then counts it in the run's row just before
     * the commit. $1 manifest ids (bigint[] text), $2 grace, $3 marks. Deletes the locked manifests that are still
     * untagged, no manifest of the repository lists as a child or names as its subject, and were not released
     * within the window; their marks go, so a later pass sees only those left. */
    BERTH_DB__STMT(
        BERTH_Q_GC_SWEEP_MANIFESTS,
        "WITH d AS (DELETE FROM manifests m USING repositories r WHERE m.id = ANY($1::bigint[]) AND r.id = m.repository_id AND NOT "
        "EXISTS (SELECT 1 FROM tags t WHERE t.manifest_id = m.id) AND NOT EXISTS (SELECT 1 FROM manifest_refs x JOIN manifests p "
        "ON p.id = x.manifest_id WHERE x.digest = m.digest AND x.kind = 1 AND p.repository_id = m.repository_id) AND NOT EXISTS "
        "(SELECT 1 FROM manifests f WHERE f.repository_id = m.repository_id AND f.subject_digest = m.digest) AND " NOT_RELEASED(
            "m.repository_id", "m.digest",
            "$2") " RETURNING r.name, m.repository_id, m.digest, m.size), nt AS (SELECT pg_notify('berth_invalidate', x.name) FROM "
                  "(SELECT DISTINCT name FROM d) x), k AS (DELETE FROM gc_marks g USING d WHERE g.run_id = $3::bigint AND g.kind = 1 "
                  "AND g.repository_id = d.repository_id AND g.digest = d.digest) SELECT json_build_object('n', (SELECT count(*) "
                  "FROM d), 'bytes', 0, 'deleted', (SELECT coalesce(json_agg(json_build_object('repo', name, 'digest', digest, "
                  "'size', size)), '[]') FROM d), 'notified', (SELECT count(*) FROM nt))::text",
        3),
    /* $1 "repository_id/digest" pairs (text[]), $2 grace */
    BERTH_DB__STMT(
        BERTH_Q_GC_SWEEP_LINKS,
        "WITH d AS (DELETE FROM repository_blobs rb USING unnest($1::text[]) AS l(p) WHERE rb.repository_id = "
        "split_part(l.p, '/', 1)::bigint AND rb.digest = split_part(l.p, '/', 2) AND rb.created_at < " GRACE(
            "$2") " AND NOT EXISTS (SELECT 1 FROM manifest_refs x JOIN manifests m ON m.id = x.manifest_id WHERE x.digest = "
                  "rb.digest AND m.repository_id = rb.repository_id) AND " NOT_RELEASED(
                      "rb.repository_id", "rb.digest",
                      "$2") " RETURNING rb.repository_id AS rid), nt AS (SELECT pg_notify('berth_invalidate', r.name) FROM "
                            "repositories r WHERE r.id IN (SELECT rid FROM d)) SELECT json_build_object('n', (SELECT count(*) "
                            "FROM d), 'bytes', 0, 'notified', (SELECT count(*) FROM nt))::text",
        2),
    /* $1 digests (text[]), $2 grace: blob rows no link and no manifest needs; the files go after the commit,
     * under the locks BERTH_Q_GC_LOCK_BLOBS took */
    BERTH_DB__STMT(BERTH_Q_GC_SWEEP_BLOBS,
                   "WITH d AS (DELETE FROM blobs b WHERE b.digest = ANY($1::text[]) AND b.created_at < " GRACE(
                       "$2") " AND NOT EXISTS (SELECT 1 FROM repository_blobs rb WHERE rb.digest = b.digest) AND NOT EXISTS "
                             "(SELECT 1 FROM manifest_refs x WHERE x.digest = b.digest AND x.kind = 0) RETURNING b.digest, "
                             "b.size) SELECT json_build_object('n', (SELECT count(*) FROM d), 'bytes', (SELECT "
                             "coalesce(sum(size), 0) FROM d), 'deleted', (SELECT coalesce(json_agg(json_build_object('digest', "
                             "digest, 'size', size)), '[]') FROM d))::text",
                   2),
    /* $1 run, $2 owner, $3 lease, $4 kind (1 manifests, 2 links, 3 blobs), $5 rows deleted, $6 bytes freed, $7 cursor,
     * $8 marks processed: a batch's progress, the last statement before its commit (the run's row is locked only from
     * here to the commit); no row when this berthd lost the run (the batch is rolled back) */
    BERTH_DB__STMT(BERTH_Q_GC_PROGRESS,
                   "UPDATE gc_runs u SET manifests_deleted = u.manifests_deleted + CASE WHEN $4::int = 1 THEN $5::bigint ELSE 0 "
                   "END, links_deleted = u.links_deleted + CASE WHEN $4::int = 2 THEN $5::bigint ELSE 0 END, blobs_deleted = "
                   "u.blobs_deleted + CASE WHEN $4::int = 3 THEN $5::bigint ELSE 0 END, bytes_freed = u.bytes_freed + $6::bigint, "
                   "cursor_id = $7::bigint, processed = u.processed + $8::bigint, " LEASE_SET("$3") " WHERE " LEASE_OK(
                       "$1", "$2") " RETURNING " RUN_STATE "::text",
                   8),
    /* $1 digests (text[]) with no blob row: those whose blob-file lock the orphan sweep got, exclusively for its
     * transaction (an upload placing one of these files holds its lock shared until its row is committed: tried,
     * so that file is left for the next run and nothing waits); BERTH_Q_GC_FILES_UNOWNED then re-checks them */
    BERTH_DB__STMT(BERTH_Q_GC_FILES_LOCK,
                   "SELECT coalesce(json_agg(d), '[]')::text FROM unnest($1::text[]) AS d WHERE pg_try_advisory_xact_lock("
                   "" BERTH_DB__BLOB_FILE_LOCK_CLASS ", hashtext(d))",
                   1),
    /* a blob batch's session locks (BERTH_Q_GC_LOCK_BLOBS) once its files are gone, or it failed */
    BERTH_DB__STMT(BERTH_Q_GC_FILES_UNLOCK, "SELECT pg_advisory_unlock_all()::text", 0),
    /* $1 digests: those with no blob row (under the locks above, in a later statement: their files may go) */
    BERTH_DB__STMT(BERTH_Q_GC_FILES_UNOWNED,
                   "SELECT coalesce(json_agg(d), '[]')::text FROM unnest($1::text[]) AS d WHERE NOT EXISTS (SELECT 1 FROM blobs b "
                   "WHERE b.digest = d)",
                   1),
    /* $1 run, $2 owner, $3 lease, $4 files removed, $5 their bytes */
    BERTH_DB__STMT(BERTH_Q_GC_ORPHANS,
                   "UPDATE gc_runs u SET orphans_found = u.orphans_found + $4::bigint, orphan_bytes = u.orphan_bytes + $5::bigint, "
                   "" LEASE_SET("$3") " WHERE " LEASE_OK("$1", "$2") " RETURNING " RUN_STATE "::text",
                   5),
    /* $1 grace: releases older than the window say nothing any more */
    BERTH_DB__STMT(BERTH_Q_GC_PRUNE,
                   "WITH d AS (DELETE FROM gc_releases WHERE at < " GRACE("$1") " RETURNING 1) SELECT count(*)::text FROM d", 1),
    /* the end of a manifest sweep: the usage its batches released (the ledger) folded into the quota rows */
    BERTH_DB__STMT(BERTH_Q_GC_SETTLE_QUOTAS, "SELECT berth_quota_settle()::text", 0),
    /* set in the collector's sweep transactions: its own manifest deletions write no releases (they were garbage) */
    BERTH_DB__STMT(BERTH_Q_GC_QUIET, "SELECT set_config('berth.gc', 'on', true)", 0),
};

int berth_db_gc_analyze(berth_dbconn_t *c, berth_err_t *err)
{
    return berth_db_exec(c, "ANALYZE gc_marks", err); /* a utility statement: it cannot be prepared */
}
