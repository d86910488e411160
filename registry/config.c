#include "registry/config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

typedef enum {
    T_STR,
    T_INT,
    T_BOOL,
    T_BYTES,
    T_SECONDS,
    T_LIMIT
} type_t; /* T_SECONDS: 0 allowed, up to a year; T_LIMIT: T_BYTES or -1 (unlimited) */

/* Every directive in one table: YAML path, environment override, type, target (redis static_configs[]). */
#define FIELD(f) offsetof(berth_config_t, f)
static const struct {
    const char *key, *env;
    type_t type;
    size_t off;
} directives[] = {
    {"http.addr", "BERTH_HTTP_ADDR", T_STR, FIELD(http_addr)},
    {"http.tls_addr", "BERTH_TLS_ADDR", T_STR, FIELD(tls_addr)},
    {"http.tls_cert", "BERTH_TLS_CERT", T_STR, FIELD(tls_cert)},
    {"http.tls_key", "BERTH_TLS_KEY", T_STR, FIELD(tls_key)},
    {"external_url", "BERTH_EXTERNAL_URL", T_STR, FIELD(external_url)},
    {"database.url", "BERTH_DATABASE_URL", T_STR, FIELD(database_url)},
    {"database.pool", "BERTH_DATABASE_POOL", T_INT, FIELD(database_pool)},
    {"database.deadline_ms", "BERTH_DATABASE_DEADLINE_MS", T_INT, FIELD(database_deadline_ms)},
    {"storage.root", "BERTH_STORAGE_ROOT", T_STR, FIELD(storage_root)},
    {"storage.min_free_bytes", "BERTH_STORAGE_MIN_FREE", T_BYTES, FIELD(storage_min_free)},
    {"storage.driver", "BERTH_STORAGE_DRIVER", T_STR, FIELD(storage_driver)},
    {"storage.s3.endpoint", "BERTH_S3_ENDPOINT", T_STR, FIELD(s3_endpoint)},
    {"storage.s3.region", "BERTH_S3_REGION", T_STR, FIELD(s3_region)},
    {"storage.s3.bucket", "BERTH_S3_BUCKET", T_STR, FIELD(s3_bucket)},
    {"storage.s3.prefix", "BERTH_S3_PREFIX", T_STR, FIELD(s3_prefix)},
    {"storage.s3.access_key", "BERTH_S3_ACCESS_KEY", T_STR, FIELD(s3_access_key)},
    {"storage.s3.secret_key_file", "BERTH_S3_SECRET_KEY_FILE", T_STR, FIELD(s3_secret_key_file)},
    {"storage.s3.secret_key", "BERTH_S3_SECRET_KEY", T_STR, FIELD(s3_secret_key)},
    {"storage.s3.ca_file", "BERTH_S3_CA_FILE", T_STR, FIELD(s3_ca_file)},
    {"storage.s3.path_style", "BERTH_S3_PATH_STYLE", T_BOOL, FIELD(s3_path_style)},
    {"storage.s3.part_size_mib", "BERTH_S3_PART_SIZE_MIB", T_INT, FIELD(s3_part_size_mib)},
    {"storage.s3.redirect", "BERTH_S3_REDIRECT", T_BOOL, FIELD(s3_redirect)},
    {"storage.s3.edge_cache_bytes", "BERTH_S3_EDGE_CACHE", T_BYTES, FIELD(s3_edge_cache)},
    {"storage.s3.tls_verify", "BERTH_S3_TLS_VERIFY", T_BOOL, FIELD(s3_tls_verify)},
    {"storage.s3.timeout_ms", "BERTH_S3_TIMEOUT_MS", T_INT, FIELD(s3_timeout_ms)},
    {"storage.s3.retries", "BERTH_S3_RETRIES", T_INT, FIELD(s3_retries)},
    {"run_dir", "BERTH_RUN_DIR", T_STR, FIELD(run_dir)},
    {"admin_password", "BERTH_ADMIN_PASSWORD", T_STR, FIELD(admin_password)},
    {"log.level", "BERTH_LOG_LEVEL", T_STR, FIELD(log_level)},
    {"log.access", "BERTH_ACCESS_LOG", T_STR, FIELD(access_log)},
    {"edge.nginx", "BERTH_NGINX", T_STR, FIELD(nginx)},
    {"edge.workers", NULL, T_INT, FIELD(edge_workers)},
    {"edge.decision_cache", "BERTH_EDGE_DECISION_CACHE", T_BOOL, FIELD(edge_decision_cache)},
    {"edge.decision_inodes", "BERTH_EDGE_DECISION_INODES", T_INT, FIELD(edge_decision_inodes)},
    {"edge.allow_root", "BERTH_EDGE_ALLOW_ROOT", T_BOOL, FIELD(edge_allow_root)},
    {"ui.dir", "BERTH_UI_DIR", T_STR, FIELD(ui_dir)},
    {"server.loops", NULL, T_INT, FIELD(loops)},
    {"server.workers", NULL, T_INT, FIELD(workers)},
    {"server.auth_workers", "BERTH_AUTH_WORKERS", T_INT, FIELD(auth_workers)},
    {"server.auth_queue", "BERTH_AUTH_QUEUE", T_INT, FIELD(auth_queue)},
    {"uploads.max_connections", "BERTH_UPLOAD_MAX_CONNECTIONS", T_INT, FIELD(upload_connections)},
    {"uploads.max_per_principal", "BERTH_UPLOAD_MAX_PER_PRINCIPAL", T_INT, FIELD(upload_per_principal)},
    {"uploads.max_per_address", "BERTH_UPLOAD_MAX_PER_ADDRESS", T_INT, FIELD(upload_per_address)},
    {"uploads.idle_timeout_seconds", "BERTH_UPLOAD_IDLE_TIMEOUT", T_INT, FIELD(upload_idle_timeout)},
    {"uploads.max_age_seconds", "BERTH_UPLOAD_MAX_AGE", T_INT, FIELD(upload_max_age)},
    {"auth.keys_dir", "BERTH_KEYS_DIR", T_STR, FIELD(keys_dir)},
    {"auth.issuer", NULL, T_STR, FIELD(token_issuer)},
    {"auth.service", NULL, T_STR, FIELD(token_service)},
    {"auth.token_ttl_seconds", NULL, T_INT, FIELD(token_ttl)},
    {"auth.decision_ttl_seconds", "BERTH_AUTH_DECISION_TTL", T_INT, FIELD(decision_ttl)},
    {"uploads.purge_interval_seconds", "BERTH_UPLOAD_PURGE_INTERVAL", T_INT, FIELD(upload_purge_interval)},
    {"auth.session_ttl_seconds", NULL, T_INT, FIELD(session_ttl)},
    {"auth.token_algorithm", "BERTH_TOKEN_ALGORITHM", T_STR, FIELD(token_alg)},
    {"projects.creation", "BERTH_PROJECT_CREATION", T_STR, FIELD(project_creation)},
    {"projects.auto_create", "BERTH_PROJECTS_AUTO_CREATE", T_BOOL, FIELD(projects_auto_create)},
    {"quota.default_storage_limit", "BERTH_QUOTA_DEFAULT_STORAGE_LIMIT", T_LIMIT, FIELD(quota_default)},
    {"quota.warning_percent", "BERTH_QUOTA_WARNING_PERCENT", T_INT, FIELD(quota_warning_percent)},
    {"isa.view", "BERTH_ISA_VIEW", T_BOOL, FIELD(isa_view)},
    {"replication.workers", NULL, T_INT, FIELD(repl_workers)},
    {"replication.key_file", "BERTH_REPLICATION_KEY_FILE", T_STR, FIELD(repl_key_file)},
    {"replication.chunk_kib", "BERTH_REPLICATION_CHUNK_KIB", T_INT, FIELD(repl_chunk)},
    {"proxy.workers", "BERTH_PROXY_WORKERS", T_INT, FIELD(proxy_workers)},
    {"proxy.manifest_ttl", "BERTH_PROXY_MANIFEST_TTL", T_INT, FIELD(proxy_manifest_ttl)},
    {"gc.grace_seconds", "BERTH_GC_GRACE_SECONDS", T_SECONDS, FIELD(gc_grace)},
    {"gc.lease_seconds", "BERTH_GC_LEASE_SECONDS", T_INT, FIELD(gc_lease)},
    {"gc.batch", "BERTH_GC_BATCH", T_INT, FIELD(gc_batch)},
    {"gc.interval_seconds", "BERTH_GC_INTERVAL_SECONDS", T_SECONDS, FIELD(gc_interval)},
    {"webhook.workers", "BERTH_WEBHOOK_WORKERS", T_INT, FIELD(wh_workers)},
    {"webhook.timeout_seconds", "BERTH_WEBHOOK_TIMEOUT_SECONDS", T_INT, FIELD(wh_timeout)},
    {"webhook.max_attempts", "BERTH_WEBHOOK_MAX_ATTEMPTS", T_INT, FIELD(wh_max_attempts)},
    {"webhook.backoff_seconds", "BERTH_WEBHOOK_BACKOFF_SECONDS", T_INT, FIELD(wh_backoff)},
    {"webhook.backoff_cap_seconds", "BERTH_WEBHOOK_BACKOFF_CAP_SECONDS", T_INT, FIELD(wh_backoff_cap)},
    {"gateway.publish_dir", "BERTH_GATEWAY_PUBLISH_DIR", T_STR, FIELD(gw_publish_dir)},
    {"gateway.compressor", "BERTH_GATEWAY_COMPRESSOR", T_STR, FIELD(gw_compressor)},
    {"gateway.workers", "BERTH_GATEWAY_WORKERS", T_INT, FIELD(gw_workers)},
    {"gateway.threads", "BERTH_GATEWAY_THREADS", T_INT, FIELD(gw_threads)},
    {"gateway.lease_seconds", "BERTH_GATEWAY_LEASE_SECONDS", T_INT, FIELD(gw_lease)},
    {"gateway.keep_devices", NULL, T_BOOL, FIELD(gw_keep_devices)},
    {"ldap.url", "BERTH_LDAP_URL", T_STR, FIELD(ldap_url)},
    {"ldap.starttls", NULL, T_BOOL, FIELD(ldap_starttls)},
    {"ldap.search_dn", "BERTH_LDAP_SEARCH_DN", T_STR, FIELD(ldap_search_dn)},
    {"ldap.search_password_file", "BERTH_LDAP_SEARCH_PASSWORD_FILE", T_STR, FIELD(ldap_search_password_file)},
    {"ldap.base_dn", "BERTH_LDAP_BASE_DN", T_STR, FIELD(ldap_base_dn)},
    {"ldap.filter", NULL, T_STR, FIELD(ldap_filter)},
    {"ldap.uid", NULL, T_STR, FIELD(ldap_uid)},
    {"ldap.scope", NULL, T_STR, FIELD(ldap_scope)},
    {"ldap.timeout_seconds", NULL, T_INT, FIELD(ldap_timeout)},
    {"ldap.max_concurrent", "BERTH_LDAP_MAX_CONCURRENT", T_INT, FIELD(ldap_max_concurrent)},
    {"ldap.session_recheck_seconds", "BERTH_LDAP_SESSION_RECHECK_SECONDS", T_INT, FIELD(ldap_session_recheck)},
    {"ldap.verify_cert", NULL, T_BOOL, FIELD(ldap_verify_cert)},
    {"ldap.ca_file", "BERTH_LDAP_CA_FILE", T_STR, FIELD(ldap_ca_file)},
    {"ldap.group_base_dn", NULL, T_STR, FIELD(ldap_group_base_dn)},
    {"ldap.group_filter", NULL, T_STR, FIELD(ldap_group_filter)},
    {"ldap.group_name_attribute", NULL, T_STR, FIELD(ldap_group_name_attr)},
    {"ldap.group_membership_attribute", NULL, T_STR, FIELD(ldap_membership_attr)},
    {"ldap.group_admin_dn", NULL, T_STR, FIELD(ldap_group_admin_dn)},
};
#define NDIR (sizeof(directives) / sizeof(directives[0]))

static int set_value(berth_config_t *cfg, size_t i, const char *v, char *errbuf, size_t errlen)
{
    void *target = (char *)cfg + directives[i].off;
    if (directives[i].type == T_STR) {
        free(*(char **)target);
        *(char **)target = strdup(v);
        return 0;
    }
    if (directives[i].type == T_BOOL) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            snprintf(errbuf, errlen, "%s: expected true or false, got \"%s\"", directives[i].key, v);
            return -1;
        }
        *(int *)target = strcmp(v, "true") == 0;
        return 0;
    }
    char *end;
    if (directives[i].type == T_LIMIT && strcmp(v, "-1") == 0) {
        *(long long *)target = -1;
        return 0;
    }
    if (directives[i].type == T_BYTES ||
        directives[i].type == T_LIMIT) { /* bytes, or with a K/M/G/T suffix (powers of 1024); 0 is allowed */
        long long b = strtoll(v, &end, 10);
        int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : 0;
        if (shift != 0)
            end++;
        if (*v == '\0' || *end != '\0' || b < 0 || b > (1LL << (62 - shift))) {
            snprintf(errbuf, errlen, "%s: expected bytes (e.g. 1073741824 or 1G%s), got \"%s\"", directives[i].key,
                     directives[i].type == T_LIMIT ? ", or -1 for unlimited" : "", v);
            return -1;
        }
        *(long long *)target = b << shift;
        return 0;
    }
    long n = strtol(v, &end, 10);
    if (directives[i].type == T_SECONDS) {
        if (*v == '\0' || *end != '\0' || n < 0 || n > 366L * 86400) {
            snprintf(errbuf, errlen, "%s: expected seconds from 0 to 31622400, got \"%s\"", directives[i].key, v);
            return -1;
        }
        *(int *)target = (int)n;
        return 0;
    }
    if (*v == '\0' || *end != '\0' || n < 1 || n > 100000) {
        snprintf(errbuf, errlen, "%s: expected a positive integer, got \"%s\"", directives[i].key, v);
        return -1;
    }
    *(int *)target = (int)n;
    return 0;
}

static int set_key(berth_config_t *cfg, const char *key, const char *v, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < NDIR; i++)
        if (strcmp(directives[i].key, key) == 0)
            return set_value(cfg, i, v, errbuf, errlen);
    snprintf(errbuf, errlen, "unknown configuration key \"%s\"", key);
    return -1;
}

/* 1 if some directive lives under `name.` */
static int is_section(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < NDIR; i++)
        if (strncmp(directives[i].key, name, n) == 0 && directives[i].key[n] == '.')
            return 1;
    return 0;
}

/* Walk a YAML mapping of scalars and nested mappings, joining keys with '.'. */
static int load_yaml(berth_config_t *cfg, const char *path, char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(errbuf, errlen, "cannot read config %s", path);
        return -1;
    }
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    char prefix[256] = "", key[128] = "";
    int depth = 0, have_key = 0, rc = 0, done = 0;
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            snprintf(errbuf, errlen, "%s:%zu: %s", path, p.problem_mark.line + 1, p.problem ? p.problem : "YAML error");
            rc = -1;
            break;
        }
        switch (ev.type) {
        case YAML_MAPPING_START_EVENT:
            if (depth > 0) {
                if (!have_key) {
                    snprintf(errbuf, errlen, "%s:%zu: a mapping needs a key", path, ev.start_mark.line + 1);
                    rc = -1;
                    break;
                }
                size_t n = strlen(prefix);
                snprintf(prefix + n, sizeof(prefix) - n, "%s%s", n ? "." : "", key);
                have_key = 0;
            }
            depth++;
            break;
        case YAML_MAPPING_END_EVENT: {
            depth--;
            char *dot = strrchr(prefix, '.');
            if (dot != NULL)
                *dot = '\0';
            else
                prefix[0] = '\0';
            break;
        }
        case YAML_SCALAR_EVENT:
            if (depth == 0)
                break;
            if (!have_key) {
                snprintf(key, sizeof(key), "%s", (const char *)ev.data.scalar.value);
                have_key = 1;
            } else {
                char full[400];
                snprintf(full, sizeof(full), "%s%s%s", prefix, prefix[0] ? "." : "", key);
                if (ev.data.scalar.length == 0 && ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && is_section(full)) {
                    have_key = 0; /* "section:" with every key commented out */
                    break;
                }
                if (set_key(cfg, full, (const char *)ev.data.scalar.value, errbuf, errlen) != 0) {
                    size_t n = strlen(errbuf);
                    snprintf(errbuf + n, errlen - n, " (%s:%zu)", path, ev.start_mark.line + 1);
                    rc = -1;
                }
                have_key = 0;
            }
            break;
        case YAML_SEQUENCE_START_EVENT:
            snprintf(errbuf, errlen, "%s:%zu: lists are not supported here", path, ev.start_mark.line + 1);
            rc = -1;
            break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    fclose(f);
    return rc;
}

int berth_config_load(berth_config_t *cfg, const char *path, char *errbuf, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    cfg->http_addr = strdup("127.0.0.1:5000");
    cfg->storage_root = strdup("/var/lib/berth");
    cfg->log_level = strdup("info");
    cfg->access_log = strdup("");
    cfg->nginx = strdup("/usr/sbin/nginx");
    cfg->loops = (int)ncpu;
    cfg->workers = (int)ncpu * 4;
    cfg->auth_workers = 6; /* argon2 runs two at a time (auth/password.c); the rest wait there or talk to LDAP */
    cfg->auth_queue = 64;
    cfg->edge_workers = (int)ncpu;
    cfg->edge_decision_cache = 1;
    cfg->edge_decision_inodes = 65536; /* BERTH_EDGE_DECISIONS_MAX */
    cfg->upload_connections = 512;
    cfg->upload_per_principal = 64;
    cfg->upload_per_address = 128;
    cfg->upload_idle_timeout = 60;
    cfg->database_deadline_ms = 5000;
    cfg->storage_min_free = -1; /* min(1 GiB, 2 % of the file system) */
    cfg->storage_driver = strdup("filesystem");
    cfg->s3_region = strdup("us-east-1");
    cfg->s3_prefix = strdup("");
    cfg->s3_part_size_mib = 16;
    cfg->s3_edge_cache = 8LL << 30;
    cfg->s3_tls_verify = 1;
    cfg->s3_timeout_ms = 30000;
    cfg->s3_retries = 3;
    cfg->upload_max_age = 24 * 3600;
    cfg->upload_purge_interval = 600;
    cfg->token_issuer = strdup("berth");
    cfg->token_service = strdup("berth-registry");
    cfg->token_ttl = 300;
    cfg->decision_ttl = 10;
    cfg->session_ttl = 1800; /* Harbor's session_timeout */
    cfg->project_creation = strdup("adminonly");
    cfg->quota_default = -1;
    cfg->quota_warning_percent = 85;
    cfg->token_alg = strdup("ES256");
    cfg->ldap_scope = strdup("subtree");
    cfg->ldap_timeout = 5;
    cfg->ldap_max_concurrent = 3;
    cfg->ldap_session_recheck = 300;
    cfg->ldap_verify_cert = 1;
    cfg->isa_view = 1;
    cfg->repl_workers = 2;
    cfg->proxy_workers = 4;
    cfg->proxy_manifest_ttl = 60;
    cfg->repl_chunk = 8192;
    cfg->gc_grace = 7200;
    cfg->gc_lease = 60;
    cfg->gc_batch = 1000;
    cfg->gc_interval = 20;
    cfg->wh_workers = 2;
    cfg->wh_timeout = 10;
    cfg->wh_max_attempts = 10;
    cfg->wh_backoff = 1;
    cfg->wh_backoff_cap = 600;
    cfg->gw_compressor = strdup("zstd");
    cfg->gw_workers = 1;
    cfg->gw_threads = 0; /* one compressor thread per CPU (berth_sqfs_threads) */
    cfg->gw_lease = 60;
    if (path != NULL && load_yaml(cfg, path, errbuf, errlen) != 0)
        return -1;
    for (size_t i = 0; i < NDIR; i++) {
        const char *v = directives[i].env != NULL ? getenv(directives[i].env) : NULL;
        if (v != NULL && set_value(cfg, i, v, errbuf, errlen) != 0)
            return -1;
    }
    if (cfg->database_url == NULL || cfg->database_url[0] == '\0') {
        snprintf(errbuf, errlen, "database.url (BERTH_DATABASE_URL) is required");
        return -1;
    }
    if (strchr(cfg->http_addr, ':') == NULL) {
        snprintf(errbuf, errlen, "http.addr must be host:port, got \"%s\"", cfg->http_addr);
        return -1;
    }
    if (cfg->tls_addr != NULL && (cfg->tls_cert == NULL || cfg->tls_key == NULL)) {
        snprintf(errbuf, errlen, "http.tls_addr needs http.tls_cert and http.tls_key");
        return -1;
    }
    if (strcmp(cfg->project_creation, "adminonly") != 0 && strcmp(cfg->project_creation, "everyone") != 0) {
        snprintf(errbuf, errlen, "projects.creation must be adminonly or everyone, got \"%s\"", cfg->project_creation);
        return -1;
    }
    if (cfg->quota_default > (1LL << 50) || cfg->quota_warning_percent > 100) {
        snprintf(errbuf, errlen, "quota.default_storage_limit must be -1 or at most 1024T, quota.warning_percent 1 to 100");
        return -1;
    }
    if (strcmp(cfg->ldap_scope, "base") != 0 && strcmp(cfg->ldap_scope, "onelevel") != 0 &&
        strcmp(cfg->ldap_scope, "subtree") != 0) {
        snprintf(errbuf, errlen, "ldap.scope must be base, onelevel or subtree");
        return -1;
    }
    if (strcmp(cfg->gw_compressor, "zstd") != 0 && strcmp(cfg->gw_compressor, "gzip") != 0 &&
        strcmp(cfg->gw_compressor, "xz") != 0 && strcmp(cfg->gw_compressor, "lz4") != 0) {
        snprintf(errbuf, errlen, "gateway.compressor must be zstd, gzip, xz or lz4, got \"%s\"", cfg->gw_compressor);
        return -1;
    }
    if (cfg->gw_publish_dir != NULL && cfg->gw_publish_dir[0] != '\0' && cfg->gw_publish_dir[0] != '/') {
        snprintf(errbuf, errlen, "gateway.publish_dir must be an absolute path, got \"%s\"", cfg->gw_publish_dir);
        return -1;
    }
    if (cfg->ldap_url != NULL && cfg->ldap_url[0] != '\0' && (cfg->ldap_base_dn == NULL || cfg->ldap_base_dn[0] == '\0')) {
        snprintf(errbuf, errlen, "ldap.url needs ldap.base_dn");
        return -1;
    }
    if (cfg->edge_decision_inodes < 64 || cfg->edge_decision_inodes > 4000000) {
        snprintf(errbuf, errlen, "edge.decision_inodes must be 64 to 4000000");
        return -1;
    }
    if (cfg->auth_workers < 1 || cfg->auth_queue < 1 || cfg->ldap_max_concurrent < 1 || cfg->ldap_session_recheck < 1) {
        snprintf(errbuf, errlen,
                 "server.auth_workers, server.auth_queue, ldap.max_concurrent and ldap.session_recheck_seconds "
                 "must be at least 1");
        return -1;
    }
    if (cfg->gc_grace < 0 || cfg->gc_lease < 1 || cfg->gc_batch < 1 || cfg->gc_batch > 100000 || cfg->gc_interval < 1) {
        snprintf(errbuf, errlen,
                 "gc.grace_seconds must be 0 or more, gc.lease_seconds at least 1, gc.batch 1 to 100000, "
                 "gc.interval_seconds at least 1");
        return -1;
    }
    if (cfg->wh_workers < 1 || cfg->wh_workers > 16 || cfg->wh_timeout < 1 || cfg->wh_timeout > 3600 || cfg->wh_max_attempts < 1 ||
        cfg->wh_max_attempts > 1000 || cfg->wh_backoff < 1 || cfg->wh_backoff_cap < cfg->wh_backoff ||
        cfg->wh_backoff_cap > 86400) {
        snprintf(errbuf, errlen,
                 "webhook.workers must be 1 to 16, webhook.timeout_seconds 1 to 3600, webhook.max_attempts 1 to 1000, "
                 "webhook.backoff_seconds at least 1 and webhook.backoff_cap_seconds from it to 86400");
        return -1;
    }
    if (strcmp(cfg->storage_driver, "filesystem") != 0 && strcmp(cfg->storage_driver, "s3") != 0) {
        snprintf(errbuf, errlen, "storage.driver must be filesystem or s3, got \"%s\"", cfg->storage_driver);
        return -1;
    }
    if (strcmp(cfg->storage_driver, "s3") == 0) {
        if (cfg->s3_endpoint == NULL || cfg->s3_bucket == NULL || cfg->s3_access_key == NULL) {
            snprintf(errbuf, errlen, "storage.driver s3 needs storage.s3.endpoint, storage.s3.bucket and storage.s3.access_key");
            return -1;
        }
        if (cfg->s3_part_size_mib < 5) {
            snprintf(errbuf, errlen, "storage.s3.part_size_mib must be at least 5 (S3's smallest part)");
            return -1;
        }
        if (cfg->s3_secret_key != NULL && cfg->s3_secret_key[0] == '\0') { /* set but empty: as if unset */
            free(cfg->s3_secret_key);
            cfg->s3_secret_key = NULL;
        }
        if (cfg->s3_secret_key == NULL && cfg->s3_secret_key_file != NULL) {
            FILE *f = fopen(cfg->s3_secret_key_file, "r");
            char line[512] = "";
            if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
                snprintf(errbuf, errlen, "storage.s3.secret_key_file %s cannot be read", cfg->s3_secret_key_file);
                if (f != NULL)
                    fclose(f);
                return -1;
            }
            fclose(f);
            line[strcspn(line, "\r\n")] = '\0';
            cfg->s3_secret_key = strdup(line);
        }
        if (cfg->s3_secret_key == NULL) {
            snprintf(errbuf, errlen, "storage.driver s3 needs storage.s3.secret_key_file (or BERTH_S3_SECRET_KEY)");
            return -1;
        }
    }
    if (cfg->run_dir != NULL && cfg->run_dir[0] == '\0') { /* BERTH_RUN_DIR="": unset, never the current directory */
        free(cfg->run_dir);
        cfg->run_dir = NULL;
    }
    if (cfg->run_dir == NULL) {
        size_t n = strlen(cfg->storage_root) + 8;
        cfg->run_dir = malloc(n);
        snprintf(cfg->run_dir, n, "%s/run", cfg->storage_root);
    }
    if (cfg->run_dir[0] != '/') { /* nginx takes -c relative to its -p (the run directory itself): make it absolute */
        char cwd[4096];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            snprintf(errbuf, errlen, "run_dir %s is relative and the current directory is unknown", cfg->run_dir);
            return -1;
        }
        size_t n = strlen(cwd) + strlen(cfg->run_dir) + 2;
        char *abs = malloc(n);
        snprintf(abs, n, "%s/%s", cwd, cfg->run_dir);
        free(cfg->run_dir);
        cfg->run_dir = abs;
    }
    if (cfg->keys_dir == NULL) {
        size_t n = strlen(cfg->storage_root) + 8;
        cfg->keys_dir = malloc(n);
        snprintf(cfg->keys_dir, n, "%s/keys", cfg->storage_root);
    }
    if (cfg->repl_key_file == NULL) {
        size_t n = strlen(cfg->keys_dir) + 20;
        cfg->repl_key_file = malloc(n);
        snprintf(cfg->repl_key_file, n, "%s/replication.key", cfg->keys_dir);
    }
    cfg->external_url_set = cfg->external_url != NULL && cfg->external_url[0] != '\0';
    if (!cfg->external_url_set) {
        free(cfg->external_url);
        size_t n = strlen(cfg->http_addr) + 8;
        cfg->external_url = malloc(n);
        snprintf(cfg->external_url, n, "http://%s", cfg->http_addr);
    }
    if (cfg->database_pool == 0)
        cfg->database_pool =
            cfg->workers + cfg->auth_workers + 2 * cfg->proxy_workers + 8; /* a fetch holds its claim's and stores on another */
    return 0;
}

void berth_config_dispose(berth_config_t *cfg)
{
    for (size_t i = 0; i < NDIR; i++)
        if (directives[i].type == T_STR)
            free(*(char **)((char *)cfg + directives[i].off));
    memset(cfg, 0, sizeof(*cfg));
}
