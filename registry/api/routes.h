/* The endpoint groups of registry/api/, for the dispatcher (api.c) only: no group calls another. */
#ifndef BERTH_API_ROUTES_H
#define BERTH_API_ROUTES_H

#include "registry/api/internal.h"

/* Each answers and returns 0 or -1, or returns 1 when it has no such endpoint. */
int berth_api_projects_route(berth_api_t *a);
int berth_api_accounts_route(berth_api_t *a);
int berth_api_system_route(berth_api_t *a);
int berth_api_stats_route(berth_api_t *a);
int berth_api_ldap_route(berth_api_t *a);
int berth_api_isa_route(berth_api_t *a);
int berth_api_replication_route(berth_api_t *a);
/** …/repositories/{r}/artifacts/{ref}/isa[/resolve] and …/{r}/isa/assemble (projects.c hands these over) */
int berth_api_isa_artifact(berth_api_t *a, const berth_authz_t *z, const char *project, const char *repo);
/** GET …/repositories/{r}/artifacts/{ref} (with Harbor's extra_attrs from the image config) and …/{ref}/additions/{a}
 *  (projects.c hands these over) */
int berth_api_image_artifact(berth_api_t *a, const berth_authz_t *z, const char *repo);
/** GET /health: components core, database, storage. `a->c` may be NULL (the database did not answer). */
int berth_api_health(berth_api_t *a);
/** POST /c/login (login 1) and /c/log_out (0). */
int berth_api_session(berth_api_t *a, int login);

#endif
