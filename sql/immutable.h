/*
 * Immutable tag rules inside the transactions that change tags (sql/registry.c): whether a change may move or
 * remove a tag that an enabled rule of its project protects. The refusal is BERTH_OCI_IMMUTABLE and names the
 * rule. Each check loads the project's enabled rules first and costs nothing more when there are none.
 */
#ifndef BERTH_SQL_IMMUTABLE_H
#define BERTH_SQL_IMMUTABLE_H

#include <stddef.h>

#include "sql/db.h"

/**
 * Point tag `tag` of repository `repo` (id `ridbuf`) at manifest `midbuf` (digest `digest`), in the caller's
 * transaction: the plain upsert when no rule protects the tag; otherwise the tag row is locked and may only be
 * created or left on the same digest.
 */
int berth_db__tag_set(berth_dbconn_t *c, const char *repo, const char *ridbuf, const char *tag, const char *midbuf,
                      const char *digest, berth_err_t *err);
/** Before deleting tag `tag` of `repo`: refused when it exists and a rule protects it. */
int berth_db__tag_removable(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err);
/** Before deleting manifest `digest` of `repo`: locks its row; refused when a rule protects one of its tags. */
int berth_db__manifest_removable(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err);
/** Before deleting repository `repo`: locks its row; refused when a rule protects one of its tags. */
int berth_db__repo_removable(berth_dbconn_t *c, const char *repo, berth_err_t *err);

/**
 * Read-only, for retention (its dry run answers what its real run does): 0 when no rule protects any of `tags`
 * of `repo`, else BERTH_OCI_IMMUTABLE naming the rule.
 */
int berth_db_immutable_check(berth_dbconn_t *c, const char *repo, const char *const *tags, size_t ntags, berth_err_t *err);

#endif
