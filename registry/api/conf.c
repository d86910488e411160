/* The settings the API reports or enforces (berth_api_configure; defaults until main sets them). */
#include "registry/api/internal.h"

static const berth_api_conf_t default_conf = {
    .project_creation_admin_only = 1, .session_ttl = 1800, .external_url = "", .version = ""};
const berth_api_conf_t *berth_api_conf = &default_conf;

void berth_api_configure(const berth_api_conf_t *conf)
{
    berth_api_conf = conf;
}
