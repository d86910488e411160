/*
 * An image artifact's config through the REST API, as Harbor shows it: extra_attrs (architecture, os, author,
 * created and the runtime config: entrypoint, cmd, env, labels …) on GET …/artifacts/{ref}, and
 * GET …/artifacts/{ref}/additions/build_history (the config's history entries).
 */
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/image_config.h"
#include "registry/service/sqfs_gateway.h"
#include "sql/registry.h"

/* The parsed image config of `ref` (tag or digest) in `repo`: 0 with *cfg; BERTH_ENOTFOUND when the artifact is
 * no image (*cfg NULL, nothing answered); otherwise answered (404 unknown artifact, 500 unreadable config), -1. */
static int config_of(berth_api_t *a, const char *repo, const char *ref, json_t **cfg)
{
    *cfg = NULL;
    berth_db_manifest_t m = {0};
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_db_manifest_get(a->c, repo, ref, strchr(ref, ':') != NULL, &m, &err);
    if (rc == BERTH_ENOTFOUND)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "artifact %s not found", ref);
    if (rc != 0)
        return berth_api_err(a, &err);
    rc = berth_image_config(a->reg, m.content, m.len, cfg);
    berth_db_manifest_dispose(&m);
    if (rc == BERTH_ERROR)
        return berth_api_fail(a, BERTH_OCI_INTERNAL, "the image config of %s cannot be read", ref);
    return rc;
}

static int get_artifact(berth_api_t *a)
{
    const char *repo = a->repo, *ref = berth_api_arg(a, "reference");
    const char *p[] = {repo, ref};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_ARTIFACT_GET, p, &r) != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "artifact not found");
    json_t *art = json_loads(r.json, 0, NULL);
    free(r.json);
    if (art == NULL)
        return berth_api_fail(a, BERTH_OCI_INTERNAL, "malformed artifact row");
    const char *digest = json_string_value(json_object_get(art, "digest"));
    json_t *cfg = NULL;
    int rc = digest != NULL ? config_of(a, repo, digest, &cfg) : BERTH_ENOTFOUND;
    if (rc == -1) {
        json_decref(art);
        return -1;
    }
    if (cfg != NULL)
        json_object_set_new(art, "extra_attrs", berth_image_config_attrs(cfg));
    json_decref(cfg);
    return berth_api_jsonv(a, 200, art);
}

static int addition(berth_api_t *a)
{
    const char *repo = a->repo, *ref = berth_api_arg(a, "reference"), *what = berth_api_arg(a, "addition");
    if (strcmp(what, "build_history") != 0) /* Harbor's others (values.yaml, readme.md, dependencies) are Helm's */
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "no addition %s for this artifact", what);
    json_t *cfg = NULL;
    int rc = config_of(a, repo, ref, &cfg);
    if (rc == BERTH_ENOTFOUND)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s is not an image: it has no build history", ref);
    if (rc != 0)
        return -1;
    json_t *h = json_object_get(cfg, "history");
    json_t *out = json_is_array(h) ? json_incref(h) : json_array();
    json_decref(cfg);
    return berth_api_jsonv(a, 200, out);
}

/* The squashfs of an image manifest; in a project converting on push or pull a missing one is queued here */
static int squashfs(berth_api_t *a)
{
    const char *repo = a->repo, *ref = berth_api_arg(a, "reference");
    berth_db_manifest_t m = {0};
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_db_manifest_get(a->c, repo, ref, strchr(ref, ':') != NULL, &m, &err);
    if (rc == BERTH_ENOTFOUND)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "artifact %s not found", ref);
    if (rc != 0)
        return berth_api_err(a, &err);
    int index = strcmp(m.media_type, BERTH_MT_OCI_INDEX) == 0 || strcmp(m.media_type, BERTH_MT_DOCKER_LIST) == 0;
    char digest[BERTH_DIGEST_MAX], *json = NULL;
    snprintf(digest, sizeof(digest), "%s", m.digest);
    berth_db_manifest_dispose(&m);
    if (index)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                              "%s is an index: ask for the squashfs of one of its manifests (berth-isa resolve picks this node's)",
                              ref);
    int created = 0;
    rc = berth_sqfs_gateway_request(a->c, repo, digest, &json, &created, &err);
    if (rc == BERTH_ENOTFOUND)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "no squashfs of %s: the project's hpc_squashfs is off", ref);
    if (rc != 0)
        return berth_api_err(a, &err);
    if (json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "no squashfs of %s", ref);
    return berth_api_json(a, created ? 202 : 200, json);
}

#define R "/projects/{project_name}/repositories/{repository_name}"

const berth_api_route_t berth_api_image_routes[] = {
    BERTH_API_ROUTE("GET", R "/artifacts/{reference}", BERTH_API_P_PROJECT(ARTIFACT, READ), get_artifact, "getArtifact"),
    BERTH_API_ROUTE("GET", R "/artifacts/{reference}/squashfs", BERTH_API_P_PROJECT(ARTIFACT, READ), squashfs,
                    "getArtifactSquashfs"),
    BERTH_API_ROUTE("GET", R "/artifacts/{reference}/additions/{addition}", BERTH_API_P_PROJECT(ARTIFACT, READ), addition,
                    "getAddition"),
    BERTH_API_ROUTES_END,
};

#undef R
