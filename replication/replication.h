/*
 * Replication (issue #5): policies copy artifacts between this Berth and another registry (push-based: this Berth
 * is the source; pull-based: it is the destination). An execution is one run; each artifact is a task row, which
 * makes PostgreSQL the queue: a restarted berthd takes unfinished tasks up again. Worker threads copy with
 * libcurl, both ends through the distribution API (this Berth through its own edge, as an internal system
 * user), blobs in resumable chunks: a task that failed mid-blob continues from the destination's offset.
 */
#ifndef BERTH_REPLICATION_REPLICATION_H
#define BERTH_REPLICATION_REPLICATION_H

#include <stddef.h>

#include "core/err.h"
#include "replication/policy.h" /* berth_repl_cron_matches, berth_repl_dest_project */
#include "sql/db.h"

typedef struct st_berth_repl_conf_t {
    berth_db_t *db;
    const char *self_url;  /* this Berth's edge, e.g. http://127.0.0.1:5000 */
    const char *self_user; /* the internal replication user and its password (generated at start) */
    const char *self_password;
    const char *key_file; /* AES-256-GCM key for endpoint secrets (generated when absent) */
    int workers;
    long chunk_bytes; /* blob chunk size (default 8 MiB) */
} berth_repl_conf_t;

int berth_repl_start(const berth_repl_conf_t *conf, berth_err_t *err);
void berth_repl_stop(void);

/** Start a run of a policy now. *execution_id = 0 when skipped because the previous run is still active. */
int berth_repl_trigger(long long policy_id, const char *trigger, long long *execution_id, berth_err_t *err);
/** A push or delete happened here (event-based policies). Never blocks. */
void berth_repl_event(const char *operation, const char *repo, const char *tag);

/** Seal/open an endpoint secret (hex of nonce||ciphertext||tag). Caller frees. NULL on failure. */
char *berth_repl_seal(const char *secret);
char *berth_repl_open(const char *sealed_hex);

/** Test a registry endpoint: 0 when /v2/ answers with the credentials, else err says why. */
int berth_repl_ping(const char *type, const char *url, const char *user, const char *password, int insecure, const char *ca_file,
                    berth_err_t *err);

/**
 * A delegated policy (project_scope set) may write only into a project where its owner may push. 0 when the
 * policy may run (or is not delegated), BERTH_EDENIED with `why` when it may not, another BERTH_E* code when the
 * database cannot say.
 */
int berth_repl_delegation_check(berth_dbconn_t *c, const char *owner, const char *project_scope, const char *dest_namespace,
                                char *why, size_t whysz);

#endif
