#include "sql/immutable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref.h"
#include "core/selector.h"
#include "sql/db_internal.h"

const berth_db__stmt_t berth_db__immutable_stmts[BERTH_SQL__COUNT] = {
    /* $1 project name: its enabled rules, in the order they are reported */
    BERTH_DB__STMT(BERTH_SQL_IMM_RULES,
                   "SELECT r.id, r.scope_selectors::text, r.tag_selectors::text FROM immutable_rules r JOIN projects p ON "
                   "p.id = r.project_id WHERE p.name = $1 AND NOT r.disabled ORDER BY r.priority, r.id",
                   1),
    BERTH_DB__STMT(BERTH_SQL_IMM_TAG_LOCK,
                   "SELECT m.digest FROM tags t JOIN manifests m ON m.id = t.manifest_id WHERE t.repository_id = $1::bigint "
                   "AND t.name = $2 FOR UPDATE OF t",
                   2),
    BERTH_DB__STMT(BERTH_SQL_TAG_INSERT_NEW,
                   "INSERT INTO tags (repository_id, name, manifest_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3),
    BERTH_DB__STMT(BERTH_SQL_IMM_TAG_EXISTS,
                   "SELECT 1 FROM tags t JOIN repositories r ON r.id = t.repository_id WHERE r.name = $1 AND t.name = $2 "
                   "FOR UPDATE OF t",
                   2),
    /* the manifest row is locked first, so a tag cannot be added to it while its deletion is decided */
    BERTH_DB__STMT(BERTH_SQL_IMM_MANIFEST_TAGS,
                   "WITH m AS (SELECT m.id FROM manifests m JOIN repositories r ON r.id = m.repository_id WHERE r.name = $1 "
                   "AND m.digest = $2 FOR UPDATE OF m) SELECT t.name FROM tags t JOIN m ON t.manifest_id = m.id",
                   2),
    BERTH_DB__STMT(BERTH_SQL_IMM_REPO_TAGS,
                   "WITH r AS (SELECT id FROM repositories WHERE name = $1 FOR UPDATE) SELECT t.name FROM tags t JOIN r ON "
                   "t.repository_id = r.id",
                   1),
};

typedef struct {
    long long id;
    berth_rule_sel_t sel;
} rule_t;

typedef struct {
    rule_t *v;
    size_t n;
} rules_t;

static void rules_dispose(rules_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        berth_rule_sel_dispose(&r->v[i].sel);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* The enabled rules of the project `repo` belongs to. A stored rule that no longer parses protects nothing and is
 * logged by the API that lists it; it cannot be stored that way through the API. */
static int rules_load(berth_dbconn_t *c, const char *repo, rules_t *out, berth_err_t *err)
{
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    snprintf(project, sizeof(project), "%.*s", (int)plen, repo);
    const char *p[] = {project};
    out->v = NULL;
    out->n = 0;
    PGresult *res = berth_db__run(c, BERTH_SQL_IMM_RULES, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    int rows = PQntuples(res);
    out->v = calloc((size_t)rows + 1, sizeof(*out->v));
    for (int i = 0; i < rows; i++) {
        json_t *scope = json_loads(PQgetvalue(res, i, 1), 0, NULL), *tags = json_loads(PQgetvalue(res, i, 2), 0, NULL);
        char why[160];
        rule_t *r = &out->v[out->n];
        if (berth_rule_sel_parse(&r->sel, scope, tags, why, sizeof(why)) == 0) {
            r->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
            out->n++;
        } else {
            berth_rule_sel_dispose(&r->sel);
        }
        json_decref(scope);
        json_decref(tags);
    }
    PQclear(res);
    return 0;
}

/* The first rule protecting `tag` in `repo` (full name), or NULL. */
static const rule_t *protecting(const rules_t *rules, const char *repo, const char *tag)
{
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    const char *short_name = repo[plen] == '/' ? repo + plen + 1 : repo + plen;
    for (size_t i = 0; i < rules->n; i++)
        if (berth_rule_sel_repo(&rules->v[i].sel, short_name) && berth_rule_sel_tag(&rules->v[i].sel, tag))
            return &rules->v[i];
    return NULL;
}

static int refuse(const rule_t *r, const char *repo, const char *tag, const char *what, berth_err_t *err)
{
    char desc[160];
    return berth_err_set(err, BERTH_OCI_IMMUTABLE, "immutable tag rule %lld (%s) protects %s:%s: it cannot be %s", r->id,
                         berth_rule_sel_describe(&r->sel, desc, sizeof(desc)), repo, tag, what);
}

static int count_of(PGresult *res)
{
    int n = (int)strtol(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return n;
}

static int failed(berth_err_t *err)
{
    return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
}

int berth_db__tag_set(berth_dbconn_t *c, const char *repo, const char *ridbuf, const char *tag, const char *midbuf,
                      const char *digest, berth_err_t *err)
{
    rules_t rules;
    int rc = rules_load(c, repo, &rules, err);
    if (rc != 0)
        return rc;
    const rule_t *r = protecting(&rules, repo, tag);
    PGresult *res;
    if (r == NULL) {
        rules_dispose(&rules);
        const char *tp[] = {ridbuf, tag, midbuf};
        return (res = berth_db__run(c, BERTH_SQL_TAG_UPSERT, tp, NULL, NULL, 0, err)) != NULL ? (PQclear(res), 0) : failed(err);
    }
    /* Protected: create the tag if it is new; otherwise it must already name this digest. A creation racing ours
     * makes the insert do nothing, and the second look (which waits for that transaction) decides. */
    const char *lp[] = {ridbuf, tag}, *ip[] = {ridbuf, tag, midbuf};
    for (int attempt = 0; attempt < 2 && rc == 0; attempt++) {
        if ((res = berth_db__run(c, BERTH_SQL_IMM_TAG_LOCK, lp, NULL, NULL, 0, err)) == NULL) {
            rc = failed(err);
            break;
        }
        if (PQntuples(res) > 0) {
            int same = strcmp(PQgetvalue(res, 0, 0), digest) == 0;
            PQclear(res);
            rc = same ? 0 : refuse(r, repo, tag, "moved to another digest", err);
            break;
        }
        PQclear(res);
        if ((res = berth_db__run(c, BERTH_SQL_TAG_INSERT_NEW, ip, NULL, NULL, 0, err)) == NULL)
            rc = failed(err);
        else if (count_of(res) == 1)
            break;
    }
    rules_dispose(&rules);
    return rc;
}

int berth_db__tag_removable(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err)
{
    rules_t rules;
    int rc = rules_load(c, repo, &rules, err);
    if (rc != 0)
        return rc;
    const rule_t *r = protecting(&rules, repo, tag);
    if (r != NULL) {
        const char *p[] = {repo, tag};
        PGresult *res = berth_db__run(c, BERTH_SQL_IMM_TAG_EXISTS, p, NULL, NULL, 0, err);
        if (res == NULL)
            rc = failed(err);
        else if (PQntuples(res) > 0)
            rc = refuse(r, repo, tag, "deleted", err);
        if (res != NULL)
            PQclear(res);
    }
    rules_dispose(&rules);
    return rc;
}

/* Refused when a rule protects one of the tags the statement lists. */
static int tags_removable(berth_dbconn_t *c, berth_sql_id_t id, const char *const *p, const char *repo, const char *what,
                          berth_err_t *err)
{
    rules_t rules;
    int rc = rules_load(c, repo, &rules, err);
    if (rc != 0 || rules.n == 0) {
        rules_dispose(&rules);
        return rc;
    }
    PGresult *res = berth_db__run(c, id, p, NULL, NULL, 0, err);
    if (res == NULL)
        rc = failed(err);
    for (int i = 0; res != NULL && i < PQntuples(res) && rc == 0; i++) {
        const rule_t *r = protecting(&rules, repo, PQgetvalue(res, i, 0));
        if (r != NULL)
            rc = refuse(r, repo, PQgetvalue(res, i, 0), what, err);
    }
    if (res != NULL)
        PQclear(res);
    rules_dispose(&rules);
    return rc;
}

int berth_db__manifest_removable(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err)
{
    const char *p[] = {repo, digest};
    return tags_removable(c, BERTH_SQL_IMM_MANIFEST_TAGS, p, repo, "deleted with its artifact", err);
}

int berth_db__repo_removable(berth_dbconn_t *c, const char *repo, berth_err_t *err)
{
    const char *p[] = {repo};
    return tags_removable(c, BERTH_SQL_IMM_REPO_TAGS, p, repo, "deleted with its repository", err);
}

int berth_db_immutable_check(berth_dbconn_t *c, const char *repo, const char *const *tags, size_t ntags, berth_err_t *err)
{
    rules_t rules;
    int rc = rules_load(c, repo, &rules, err);
    for (size_t i = 0; rc == 0 && i < ntags; i++) {
        const rule_t *r = protecting(&rules, repo, tags[i]);
        if (r != NULL)
            rc = refuse(r, repo, tags[i], "deleted", err);
    }
    rules_dispose(&rules);
    return rc;
}
