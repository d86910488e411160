/* Proxy-cache projects' metadata (issue #14): which project proxies which endpoint, when a tag was last compared
 * with the upstream, and the cross-process claim on one fetch. */
#ifndef BERTH_SQL_PROXY_H
#define BERTH_SQL_PROXY_H

#include "sql/db.h"

typedef struct st_berth_db_proxy_t {
    long long registry_id; /* the endpoint (registries.id) */
    long speed_kb;         /* proxy_speed_kb: upstream download cap in KiB/s, -1 none */
    double tag_age;        /* seconds since the asked tag was last compared with the upstream; -1: never */
} berth_db_proxy_t;

/** 1 with *out filled when `repo`'s project is a proxy cache, 0 when it is not (or absent), <0 on error. `tag` may be NULL. */
int berth_db_proxy_of(berth_dbconn_t *c, const char *repo, const char *tag, berth_db_proxy_t *out, berth_err_t *err);
/** Note that `repo:tag` was just compared with the upstream. */
int berth_db_proxy_checked(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err);
/**
 * Try to take the session advisory lock named by `key` (one fetch across every berthd on this database). 1 when
 * taken, 0 when another session holds it, <0 on error. Release with berth_db_proxy_unlock on the same connection.
 */
int berth_db_proxy_trylock(berth_dbconn_t *c, const char *key, berth_err_t *err);
void berth_db_proxy_unlock(berth_dbconn_t *c, const char *key);

#endif
