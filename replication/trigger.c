#include "replication/trigger.h"

#include <stdio.h>
#include <string.h>

#include "auth/authz.h"
#include "core/log.h"
#include "replication/policy.h"
#include "replication/queue.h"
#include "replication/replication.h"
#include "replication/transfer.h"

static berth_db_t *db;

void berth_repl_trigger_init(berth_db_t *d)
{
    db = d;
}

/*
 * A project admin's policy must not become a way to write where that admin cannot (another project, through
 * dest_namespace, with the endpoint's or the internal replication user's rights). Push and pull policies alike
 * are judged on this Berth's projects: for a push policy the names on the remote are this site's names.
 */
int berth_repl_delegation_check(berth_dbconn_t *c, const char *owner, const char *scope, const char *ns, char *why, size_t whysz)
{
    if (scope == NULL || scope[0] == '\0')
        return 0; /* a system admin's policy */
    char project[256];
    berth_repl_dest_project(ns, scope, project);
    berth_err_t err;
    int may = owner != NULL && owner[0] != '\0' ? berth_authz_account_may_push(c, owner, project, &err) : 0;
    if (may < 0)
        return may;
    if (may)
        return 0;
    snprintf(why, whysz, "the policy's owner %s may not push to project %s", owner != NULL && owner[0] ? owner : "(none)", project);
    return BERTH_EDENIED;
}

/* The same check at every run: 0 to go on, or the execution is marked Failed with the reason */
static int run_refused(const berth_repl_policy_t *pol, long long exec)
{
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(db, &err);
    char why[400] = "the database is unavailable";
    int rc = c != NULL ? berth_repl_delegation_check(c, pol->creator, pol->project_scope, pol->dest_namespace, why, sizeof(why))
                       : BERTH_EUNAVAIL;
    if (c != NULL)
        berth_db_release(db, c);
    if (rc == 0)
        return 0;
    berth_log_warn("replication: execution %lld refused: %s", exec, why);
    berth_repl_queue_exec_fail(exec, why);
    return 1;
}

int berth_repl_trigger(long long policy_id, const char *trigger, long long *execution_id, berth_err_t *err)
{
    *execution_id = 0;
    berth_repl_policy_t pol;
    int rc = berth_repl_queue_policy_get(policy_id, &pol);
    if (rc != 0)
        return rc == BERTH_ENOTFOUND ? berth_err_set(err, BERTH_OCI_NOT_FOUND, "policy %lld not found", policy_id)
                                     : berth_err_set(err, BERTH_OCI_UNAVAILABLE, "policy %lld cannot be read", policy_id);
    long long eid;
    rc = berth_repl_queue_exec_create(policy_id, trigger, berth_repl_skips_while_active(trigger), &eid);
    if (rc != 0) {
        berth_repl_policy_dispose(&pol);
        if (rc == BERTH_EEXISTS)
            return 0; /* the previous run is still active: skipped, as Harbor does */
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "no execution of policy %lld could be created", policy_id);
    }
    *execution_id = eid;
    if (run_refused(&pol, eid)) {
        berth_repl_policy_dispose(&pol);
        return 0;
    }
    berth_err_t e2;
    int n = berth_repl_transfer_enumerate(&pol, eid, &e2);
    berth_repl_policy_dispose(&pol);
    if (n < 0) {
        berth_repl_queue_exec_stop(eid);
        return berth_err_set(err, e2.oci, "%s", e2.msg);
    }
    if (n == 0)
        berth_repl_queue_exec_finish(eid, "nothing to replicate");
    berth_repl__wake();
    return 0;
}

void berth_repl_trigger_event(const char *operation, const char *repo, const char *tag)
{
    berth_repl_policy_t *pols;
    size_t n;
    if (berth_repl_queue_event_policies(&pols, &n) != 0)
        return;
    berth_repl_op_t op = strcmp(operation, "delete") == 0 ? BERTH_REPL_OP_DELETION : BERTH_REPL_OP_COPY;
    for (size_t i = 0; i < n; i++) {
        if (!berth_repl_event_applies(&pols[i].filters, pols[i].replicate_deletion, operation, repo, tag))
            continue;
        berth_repl_policy_t pol;
        long long eid;
        if (berth_repl_queue_policy_get(pols[i].id, &pol) != 0)
            continue;
        if (berth_repl_queue_exec_create(pol.id, "event_based", berth_repl_skips_while_active("event_based"), &eid) == 0 &&
            !run_refused(&pol, eid))
            berth_repl_queue_task_add(eid, &pol, repo, tag, op);
        berth_repl_policy_dispose(&pol);
    }
    berth_repl_queue_policies_free(pols, n);
    berth_repl__wake();
}
