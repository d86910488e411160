/* berthd: config -> database + migrations -> storage -> servers -> edge; SIGTERM drains and exits. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth/audit.h"
#include "auth/ldap.h"
#include "auth/password.h"
#include "auth/realm.h"
#include "auth/service.h"
#include "core/log.h"
#include "registry/api/api.h"
#include "registry/config.h"
#include "registry/http/access_log.h"
#include "registry/http/edge.h"
#include "registry/http/edge_ui.h"
#include "registry/http/limits.h"
#include "registry/http/listen_check.h"
#include "registry/http/server.h"
#include "registry/http/upload_server.h"
#include "registry/http/worker.h"
#include "registry/service/cache.h"
#include "registry/service/events.h"
#include "registry/service/isa_scan.h"
#include "registry/service/janitor.h"
#include "registry/service/upload_limits.h"
#include "registry/storage/store.h"
#include "replication/replication.h"
#include "sql/listen.h"
#include "sql/migrate.h"
#include "sql/registry.h"
#include <openssl/crypto.h>

#define BLOB_PREFIX "/_berth/blobs/"

static void usage(void)
{
    fprintf(stderr, "usage: berthd [--config FILE] [--check] | berthd hash-password < password\n"
                    "  --config FILE  YAML configuration (see deploy/berth.example.yaml)\n"
                    "  --check        validate configuration and database access, then exit\n");
}

/* The LDAP client from ldap.*; the search password comes from a file so it is never in the config or argv */
static int open_ldap(const berth_config_t *cfg, berth_ldap_t **out)
{
    char pw[512] = "";
    if (cfg->ldap_search_password_file != NULL && cfg->ldap_search_password_file[0] != '\0') {
        FILE *f = fopen(cfg->ldap_search_password_file, "r");
        if (f == NULL || fgets(pw, sizeof(pw), f) == NULL) {
            fprintf(stderr, "berthd: cannot read ldap.search_password_file %s\n", cfg->ldap_search_password_file);
            if (f != NULL)
                fclose(f);
            return -1;
        }
        fclose(f);
        pw[strcspn(pw, "\r\n")] = '\0';
    }
    berth_ldap_conf_t lc = {
        .url = cfg->ldap_url,
        .starttls = cfg->ldap_starttls,
        .search_dn = cfg->ldap_search_dn,
        .search_password = pw,
        .base_dn = cfg->ldap_base_dn,
        .user_filter = cfg->ldap_filter,
        .uid_attr = cfg->ldap_uid,
        .scope = strcmp(cfg->ldap_scope, "base") == 0       ? 0
                 : strcmp(cfg->ldap_scope, "onelevel") == 0 ? 1
                                                            : 2,
        .timeout = cfg->ldap_timeout,
        .verify_cert = cfg->ldap_verify_cert,
        .ca_file = cfg->ldap_ca_file,
        .group_base_dn = cfg->ldap_group_base_dn,
        .group_filter = cfg->ldap_group_filter,
        .group_name_attr = cfg->ldap_group_name_attr,
        .membership_attr = cfg->ldap_membership_attr,
        .group_admin_dn = cfg->ldap_group_admin_dn,
        .max_concurrent = cfg->ldap_max_concurrent,
    };
    berth_err_t err;
    int rc = berth_ldap_open(out, &lc, &err);
    OPENSSL_cleanse(pw, sizeof(pw));
    if (rc != 0)
        fprintf(stderr, "berthd: ldap: %s\n", err.msg);
    return rc;
}

/* Replication reaches this Berth through its own edge as an internal system user with a fresh password */
static int start_replication(const berth_config_t *cfg, berth_db_t *db)
{
    char pw[48], hex[65], hash[BERTH_PASSWORD_HASH_MAX], url[300];
    berth_authsvc_random_secret(pw, hex);
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_password_hash(hash, pw) == 0 ? berth_db_acquire(db, &err) : NULL;
    int rc = c != NULL ? berth_db_user_internal(c, "berth-replication", hash, &err) : -1;
    if (c != NULL)
        berth_db_release(db, c);
    const char *addr = cfg->http_addr;
    if (strncmp(addr, "0.0.0.0:", 8) == 0)
        snprintf(url, sizeof(url), "http://127.0.0.1:%s", addr + 8);
    else
        snprintf(url, sizeof(url), "http://%s", addr);
    berth_repl_conf_t rc_conf = {.db = db,
                                 .self_url = url,
                                 .self_user = "berth-replication",
                                 .self_password = pw,
                                 .key_file = cfg->repl_key_file,
                                 .workers = cfg->repl_workers,
                                 .chunk_bytes = (long)cfg->repl_chunk * 1024};
    if (rc == 0)
        rc = berth_repl_start(&rc_conf, &err);
    OPENSSL_cleanse(pw, sizeof(pw));
    if (rc != 0)
        fprintf(stderr, "berthd: replication: %s\n", err.msg[0] ? err.msg : "cannot create the internal user");
    return rc;
}

static int serve(berth_config_t *cfgp, berth_db_t *db, berth_store_t *store, berth_token_keys_t *keys, berth_ldap_t *ldap,
                 berth_authsvc_t *authp, sigset_t *sigsp);

int main(int argc, char **argv)
{
    const char *config_path = NULL;
    int check_only = 0;
    if (argc == 2 && strcmp(argv[1], "hash-password") == 0) {
        /* for operators and tests: the argon2id PHC string of the password on stdin */
        char pw[1025], hash[BERTH_PASSWORD_HASH_MAX];
        if (fgets(pw, sizeof(pw), stdin) == NULL)
            return 2;
        pw[strcspn(pw, "\r\n")] = '\0';
        int rc = berth_password_hash(hash, pw);
        OPENSSL_cleanse(pw, sizeof(pw));
        if (rc != 0)
            return 1;
        printf("%s\n", hash);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config_path = argv[++i];
        else if (strcmp(argv[i], "--check") == 0)
            check_only = 1;
        else {
            usage();
            return 2;
        }
    }
    /* allocations of 1 MiB and more (argon2's 19 MiB, 1 MiB upload buffers) go straight to mmap and back to the
     * kernel on free; glibc's adaptive threshold would otherwise keep them in the heap for good */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    berth_config_t cfg;
    char errbuf[512];
    int rc = 0;
    berth_db_t *db = NULL;
    berth_store_t *store = NULL;
    berth_token_keys_t *keys = NULL;
    berth_ldap_t *ldap = NULL;
    if (berth_config_load(&cfg, config_path, errbuf, sizeof(errbuf)) != 0) {
        fprintf(stderr, "berthd: bad configuration: %s\n", errbuf);
        rc = 2;
        goto Out;
    }
    /* the edge faces the internet: its nginx workers must not run as root (deploy/run.sh runs berthd as `berth`) */
    if (!check_only && geteuid() == 0 && !cfg.edge_allow_root) {
        fprintf(stderr, "berthd: refusing to run as root: the edge's nginx workers would serve the internet as root. Run "
                        "berthd as an unprivileged user (deploy/run.sh creates and uses `berth`), or set edge.allow_root: "
                        "true (BERTH_EDGE_ALLOW_ROOT=true)\n");
        rc = 2;
        goto Out;
    }
    if (berth_log_set_level(cfg.log_level) != 0) {
        fprintf(stderr, "berthd: bad configuration: log.level must be error, warn, info or debug\n");
        rc = 2;
        goto Out;
    }
    if (berth_access_log_open(cfg.access_log) != 0) {
        fprintf(stderr, "berthd: cannot open access log %s: %s\n", cfg.access_log, strerror(errno));
        rc = 2;
        goto Out;
    }
    /* signals are taken synchronously by the main thread; every thread created below inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    berth_err_t err;
    berth_err_clear(&err);
    rc = 1; /* the failures below */
    if (berth_db_open(&db, cfg.database_url, cfg.database_pool, &err) != 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        goto Out;
    }
    if (berth_db_migrate(db, &err) != 0) {
        fprintf(stderr, "berthd: schema migration failed: %s\n", err.msg);
        goto Out;
    }
    berth_db_set_deadline(db, cfg.database_deadline_ms); /* after the migrations, which may take longer */
    if (berth_store_open(&store, cfg.storage_root, &err) != 0) {
        fprintf(stderr, "berthd: storage: %s\n", err.msg);
        goto Out;
    }
    berth_store_set_reserve(store, cfg.storage_min_free);
    if (berth_token_keys_load(&keys, cfg.keys_dir, cfg.token_alg, &err) != 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        goto Out;
    }
    if (cfg.ldap_url != NULL && cfg.ldap_url[0] != '\0' && open_ldap(&cfg, &ldap) != 0)
        goto Out;
    berth_authsvc_t auth = {.db = db,
                            .keys = keys,
                            .realm = cfg.external_url,
                            .issuer = cfg.token_issuer,
                            .service = cfg.token_service,
                            .ttl_seconds = cfg.token_ttl,
                            .decision_ttl_seconds = cfg.decision_ttl,
                            .ldap = ldap,
                            .ldap_recheck_seconds = cfg.ldap_session_recheck};
    if (berth_authsvc_bootstrap(&auth, cfg.admin_password, &err) != 0) {
        fprintf(stderr, "berthd: cannot create the first admin: %s\n", err.msg);
        goto Out;
    }
    if (check_only) {
        printf("berthd: configuration and database OK\n");
        rc = 0;
        goto Out;
    }
    if (berth_listen_check(cfg.http_addr, "http.addr", "BERTH_HTTP_ADDR", errbuf, sizeof(errbuf)) != 0 ||
        (cfg.tls_addr != NULL &&
         berth_listen_check(cfg.tls_addr, "http.tls_addr", "BERTH_TLS_ADDR", errbuf, sizeof(errbuf)) != 0)) {
        fprintf(stderr, "berthd: %s\n", errbuf);
        goto Out;
    }
    rc = serve(&cfg, db, store, keys, ldap, &auth, &sigs);
Out:
    /* everything that was opened, in reverse order (the sanitizer build checks for leaks at exit) */
    berth_ldap_close(ldap);
    berth_token_keys_free(keys);
    if (store != NULL)
        berth_store_close(store);
    if (db != NULL)
        berth_db_close(db);
    berth_config_dispose(&cfg);
    berth_access_log_flush();
    return rc;
}

/* Run until a signal: threads, listeners and the edge; returns the exit status */
static int serve(berth_config_t *cfgp, berth_db_t *db, berth_store_t *store, berth_token_keys_t *keys, berth_ldap_t *ldap,
                 berth_authsvc_t *authp, sigset_t *sigsp)
{
    berth_config_t cfg = *cfgp;
    berth_authsvc_t auth = *authp;
    sigset_t sigs = *sigsp;
    (void)keys;
    (void)ldap;
    berth_api_conf_t api_conf = {.project_creation_admin_only = strcmp(cfg.project_creation, "adminonly") == 0,
                                 .session_ttl = cfg.session_ttl,
                                 .external_url = cfg.external_url,
                                 .version = BERTH_VERSION};
    berth_api_configure(&api_conf);
    berth_db_projects_auto_create(cfg.projects_auto_create);
    berth_realm_configure(cfg.external_url_set);
    if (berth_event_subscribers_install() != 0) /* before anything that can change state starts; nothing to unwind */
        return 1;
    berth_audit_start(db);
    /* other instances' writes arrive as NOTIFY, not as events here: they only invalidate the cache */
    berth_db_listener_t *listener = berth_db_listen_start(cfg.database_url, berth_cache_invalidate, berth_cache_set_enabled);
    berth_registry_t reg = {
        .db = db, .auth = &auth, .store = store, .blob_redirect_prefix = BLOB_PREFIX, .isa_view_disabled = !cfg.isa_view};
    berth_limits_t limits;
    berth_limits_init(&limits, cfg.edge_workers); /* before any listener or the edge: both inherit it */
    berth_workers_t *workers = berth_workers_start(cfg.workers);
    berth_workers_t *auth_workers = berth_workers_start(cfg.auth_workers); /* credential work only (auth/offload.h) */
    berth_isa_scan_start(&reg);
    if (start_replication(&cfg, db) != 0)
        return 1;
    berth_janitor_t *janitor = berth_janitor_start(&reg, cfg.upload_purge_interval, cfg.upload_max_age);
    berth_server_t *server = NULL;
    berth_upload_server_t *uploads = NULL;
    berth_upload_limits_configure(cfg.upload_per_principal, cfg.upload_per_address, cfg.upload_connections);
    int api_port = 0, upload_port = 0;
    if (berth_server_start(&server, &reg, workers, auth_workers, cfg.auth_queue, cfg.loops, &api_port) != 0 ||
        berth_upload_server_start(&uploads, &reg, (unsigned)cfg.upload_connections, (unsigned)cfg.upload_idle_timeout,
                                  &upload_port) != 0) {
        fprintf(stderr, "berthd: cannot start internal listeners\n");
        return 1;
    }
    char blob_root[4096];
    snprintf(blob_root, sizeof(blob_root), "%s/blobs", berth_store_root(store));
    berth_edge_conf_t edge = {
        .nginx = cfg.nginx,
        .run_dir = cfg.run_dir,
        .listen = cfg.http_addr,
        .tls_listen = cfg.tls_addr,
        .tls_cert = cfg.tls_cert,
        .tls_key = cfg.tls_key,
        .blob_root = blob_root,
        .blob_prefix = BLOB_PREFIX,
        .api_port = api_port,
        .upload_port = upload_port,
        .upload_idle_timeout = cfg.upload_idle_timeout,
        .upload_connections = cfg.upload_connections,
        .workers = cfg.edge_workers,
        .ui_dir = cfg.ui_dir,
        .limits = &limits,
    };
    char ui_err[512];
    if (berth_edge_ui_check(cfg.ui_dir, ui_err, sizeof(ui_err)) != 0) {
        fprintf(stderr, "berthd: %s\n", ui_err);
        return 1;
    }
    pid_t edge_pid = berth_edge_start(&edge);
    if (edge_pid < 0) {
        fprintf(stderr, "berthd: cannot start the edge (nginx)\n");
        return 1;
    }
    berth_log_info("berthd listening on %s%s%s (api :%d, uploads :%d, edge pid %d)", cfg.http_addr, cfg.tls_addr ? ", TLS " : "",
                   cfg.tls_addr ? cfg.tls_addr : "", api_port, upload_port, (int)edge_pid);

    int status = 0;
    for (;;) {
        int sig;
        sigwait(&sigs, &sig);
        if (sig == SIGCHLD) {
            int st;
            if (waitpid(edge_pid, &st, WNOHANG) == edge_pid) {
                berth_log_err("edge (nginx) exited unexpectedly (status %d); stopping", st);
                edge_pid = -1;
                status = 1;
                break;
            }
            continue;
        }
        berth_log_info("signal %d: draining", sig);
        break;
    }
    /* nginx stops accepting and finishes what it holds; the backends stay up until it is gone */
    berth_edge_stop(edge_pid, 60);
    berth_upload_server_stop(uploads);
    berth_server_stop(server);
    berth_janitor_stop(janitor);
    berth_repl_stop();
    berth_workers_stop(workers);
    berth_workers_stop(auth_workers);
    berth_isa_scan_stop();
    berth_audit_stop();
    berth_db_listen_stop(listener);
    berth_log_info("stopped");
    return status;
}
