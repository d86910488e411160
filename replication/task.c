#include "replication/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static char *str(const json_t *o, const char *key)
{
    return strdup(json_string_value(json_object_get(o, key)) ?: "");
}

berth_repl_endpoint_t *berth_repl_endpoint_new(const json_t *o)
{
    if (!json_is_object(o))
        return NULL;
    berth_repl_endpoint_t *e = calloc(1, sizeof(*e));
    e->id = (long long)json_integer_value(json_object_get(o, "id"));
    e->type = str(o, "type");
    e->url = str(o, "url");
    e->access_key = str(o, "access_key");
    e->secret = str(o, "secret");
    e->ca_file = str(o, "ca_file");
    e->insecure = json_is_true(json_object_get(o, "insecure"));
    return e;
}

void berth_repl_endpoint_free(berth_repl_endpoint_t *e)
{
    if (e == NULL)
        return;
    free(e->type);
    free(e->url);
    free(e->access_key);
    free(e->secret);
    free(e->ca_file);
    free(e);
}

int berth_repl_policy_parse(berth_repl_policy_t *out, const json_t *o)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(o))
        return BERTH_EINVAL;
    out->id = (long long)json_integer_value(json_object_get(o, "id"));
    out->dest_namespace = str(o, "dest_namespace");
    out->creator = str(o, "creator");
    out->project_scope = str(o, "project_scope");
    /* the schedule query names the cron; a full policy keeps it in its trigger */
    const json_t *cron = json_object_get(o, "cron");
    if (cron == NULL)
        cron = json_object_get(json_object_get(json_object_get(o, "trigger"), "trigger_settings"), "cron");
    out->cron = strdup(json_string_value(cron) ?: "");
    out->replace_count = (int)json_integer_value(json_object_get(o, "dest_namespace_replace_count"));
    out->replicate_deletion = json_is_true(json_object_get(o, "replicate_deletion"));
    berth_repl_filters_init(&out->filters, json_object_get(o, "filters"));
    out->src_registry_id = (long long)json_integer_value(json_object_get(json_object_get(o, "src_registry"), "id"));
    return 0;
}

void berth_repl_policy_dispose(berth_repl_policy_t *p)
{
    free(p->dest_namespace);
    free(p->creator);
    free(p->project_scope);
    free(p->cron);
    berth_repl_filters_dispose(&p->filters);
    berth_repl_endpoint_free(p->src_registry);
    memset(p, 0, sizeof(*p));
}

int berth_repl_task_parse(berth_repl_task_t *out, const char *json)
{
    memset(out, 0, sizeof(*out));
    json_t *o = json != NULL ? json_loads(json, 0, NULL) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return BERTH_EINVAL;
    }
    out->id = (long long)json_integer_value(json_object_get(o, "id"));
    out->execution_id = (long long)json_integer_value(json_object_get(o, "execution_id"));
    out->src = str(o, "src");
    out->dst = str(o, "dst");
    out->operation = strcmp(json_string_value(json_object_get(o, "operation")) ?: "", "deletion") == 0 ? BERTH_REPL_OP_DELETION
                                                                                                       : BERTH_REPL_OP_COPY;
    out->attempts = (int)json_integer_value(json_object_get(o, "attempts"));
    out->override = json_is_true(json_object_get(o, "override"));
    out->speed_kib = (long)json_integer_value(json_object_get(o, "speed"));
    out->src_registry = berth_repl_endpoint_new(json_object_get(o, "src_registry"));
    out->dest_registry = berth_repl_endpoint_new(json_object_get(o, "dest_registry"));
    json_decref(o);
    return 0;
}

void berth_repl_task_dispose(berth_repl_task_t *t)
{
    free(t->src);
    free(t->dst);
    berth_repl_endpoint_free(t->src_registry);
    berth_repl_endpoint_free(t->dest_registry);
    memset(t, 0, sizeof(*t));
}

void berth_repl_ref_split(const char *s, char *repo, size_t rsz, char *ref, size_t fsz)
{
    const char *at = strchr(s, '@'), *colon = strrchr(s, ':');
    const char *sep = at != NULL ? at : colon;
    snprintf(repo, rsz, "%.*s", sep != NULL ? (int)(sep - s) : (int)strlen(s), s);
    snprintf(ref, fsz, "%s", sep != NULL ? sep + 1 : "latest");
}

void berth_repl_ref_join(const char *repo, const char *ref, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s%s%s", repo, strchr(ref, ':') != NULL ? "@" : ":", ref);
}
