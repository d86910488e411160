/* berthd: config -> database + migrations -> storage -> servers -> edge; SIGTERM drains and exits. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth/audit.h"
#include "auth/gate.h"
#include "auth/ldap.h"
#include "auth/password.h"
#include "auth/realm.h"
#include "auth/service.h"
#include "core/log.h"
#include "registry/api/api.h"
#include "registry/config.h"
#include "registry/http/access_log.h"
#include "registry/http/edge.h"
#include "registry/http/edge_blobs.h"
#include "registry/http/edge_cache.h"
#include "registry/http/edge_pulls.h"
#include "registry/http/edge_trust.h"
#include "registry/http/edge_ui.h"
#include "registry/http/internal_listen.h"
#include "registry/http/limits.h"
#include "registry/http/listen_check.h"
#include "registry/http/memory.h"
#include "registry/http/server.h"
#include "registry/http/upload_server.h"
#include "registry/http/worker.h"
#include "registry/service/cache.h"
#include "registry/service/events.h"
#include "registry/service/gc.h"
#include "registry/service/isa_scan.h"
#include "registry/service/janitor.h"
#include "registry/service/proxy.h"
#include "registry/service/quota.h"
#include "registry/service/retention.h"
#include "registry/service/sqfs_gateway.h"
#include "registry/service/upload_limits.h"
#include "registry/storage/store.h"
#include "replication/replication.h"
#include "replication/seal.h"
#include "sql/listen.h"
#include "sql/migrate.h"
#include "sql/registry.h"
#include "webhook/webhook.h"
#include <openssl/crypto.h>

#define BLOB_PREFIX "/_berth/blobs/"
#define BLOB_HEAD_PREFIX "/_berth/blob-heads/"

static void usage(void)
{
    fprintf(stderr, "usage: berthd [--config FILE] [--check] | berthd hash-password < password | berthd init-keys DIR [RS256]\n"
                    "  --config FILE  YAML configuration (see deploy/berth.example.yaml)\n"
                    "  --check        validate configuration and database access, then exit\n"
                    "  init-keys DIR  create token.key, token.crt and replication.key in DIR (the keys many instances\n"
                    "                 share from a Secret; with storage.driver s3 berthd never creates them itself)\n");
}

/* berthd init-keys DIR [ALG]: the one place that creates the shared keys (kept ones are left as they are) */
static int init_keys(const char *dir, const char *alg)
{
    berth_token_keys_t *keys = NULL;
    berth_err_t err;
    berth_err_clear(&err);
    char path[4200];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p != '\0'; p++) /* its parents too, like mkdir -p */
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0750);
            *p = '/';
        }
    snprintf(path, sizeof(path), "%s/replication.key", dir);
    if (berth_token_keys_load(&keys, dir, alg, &err) != 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        return 1;
    }
    berth_token_keys_free(keys);
    if (berth_repl_seal_load_key(path) != 0) {
        fprintf(stderr, "berthd: cannot read or create %s\n", path);
        return 1;
    }
    printf("berthd: %s/token.key, token.crt and replication.key ready\n", dir);
    return 0;
}

/* With storage.driver s3 several instances serve one registry: a token signed by one must verify on another and a
 * secret sealed by one must open on another, so the keys come from configuration (a Secret), never made here */
static int check_shared_keys(const berth_config_t *cfg)
{
    if (strcmp(cfg->storage_driver, "s3") != 0)
        return 0;
    char kp[4200], cp[4200];
    snprintf(kp, sizeof(kp), "%s/token.key", cfg->keys_dir);
    snprintf(cp, sizeof(cp), "%s/token.crt", cfg->keys_dir);
    const char *missing = access(kp, R_OK) != 0 ? kp : access(cp, R_OK) != 0 ? cp : NULL;
    if (missing != NULL) {
        fprintf(stderr,
                "berthd: storage.driver s3 needs the shared token signing key: %s is missing; set auth.keys_dir "
                "(BERTH_KEYS_DIR) to the directory of the Secret holding token.key and token.crt (make them once with "
                "berthd init-keys DIR); instances never generate their own\n",
                missing);
        return -1;
    }
    if (access(cfg->repl_key_file, R_OK) != 0) {
        fprintf(stderr,
                "berthd: storage.driver s3 needs the shared replication key: %s is missing; set replication.key_file "
                "(BERTH_REPLICATION_KEY_FILE) to the Secret's replication.key (made by berthd init-keys DIR); instances "
                "never generate their own\n",
                cfg->repl_key_file);
        return -1;
    }
    return 0;
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

/*
 * Replication reaches this Berth through its own edge as an internal system user. Its password is derived from the
 * replication key: every berthd on the database shares the key (configuration), so each sets the same password
 * and none locks the others out (a fresh one per start did, with several instances).
 */
static int start_replication(const berth_config_t *cfg, berth_db_t *db)
{
    char pw[65], hash[BERTH_PASSWORD_HASH_MAX], url[300];
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_repl_seal_load_key(cfg->repl_key_file) != 0) {
        fprintf(stderr, "berthd: replication: cannot read or create the replication key %s\n", cfg->repl_key_file);
        return -1;
    }
    berth_repl_seal_derive("berth-replication system user password", pw);
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

static int serve(berth_config_t *cfgp, berth_db_t *db, berth_store_t *store, berth_authsvc_t *authp, sigset_t *sigsp);

static void forget_gone_slices(berth_dbconn_t *c, void *dir)
{
    berth_edge_cache_forget_gone(dir, c);
}

/* The blob store of storage.driver: the filesystem under storage.root, or a bucket (checked now: a missing
 * bucket or refused credentials stop the start with one line) */
static int open_store(const berth_config_t *cfg, berth_store_t **out, berth_err_t *err)
{
    if (strcmp(cfg->storage_driver, "s3") != 0)
        return berth_store_open(out, cfg->storage_root, err);
    /* storage.root still holds what is local to this instance (run_dir, keys unless configured elsewhere) */
    if (mkdir(cfg->storage_root, 0750) != 0 && errno != EEXIST)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot create %s: %s", cfg->storage_root, strerror(errno));
    berth_store_s3_conf_t c = {.s3 = {.endpoint = cfg->s3_endpoint,
                                      .region = cfg->s3_region,
                                      .bucket = cfg->s3_bucket,
                                      .prefix = cfg->s3_prefix,
                                      .access_key = cfg->s3_access_key,
                                      .secret_key = cfg->s3_secret_key,
                                      .ca_file = cfg->s3_ca_file,
                                      .path_style = cfg->s3_path_style,
                                      .tls_verify = cfg->s3_tls_verify,
                                      .timeout_ms = cfg->s3_timeout_ms,
                                      .retries = cfg->s3_retries},
                               .part_size = (int64_t)cfg->s3_part_size_mib << 20,
                               .redirect = cfg->s3_redirect,
                               .edge_cache = !cfg->s3_redirect && cfg->s3_edge_cache > 0};
    return berth_store_open_s3(out, &c, err);
}

/* A NOTIFY on the invalidation channel (sql/listen.c): "!auth" when a right may have been taken away (the triggers of
 * sql/migrations/0191), otherwise the repository whose content changed ('!' starts no repository name). */
static void on_invalidate(const char *payload)
{
    if (strcmp(payload, "!auth") == 0) {
        berth_gate_forget_all();
        berth_edge_decisions_forget(); /* the edge's kept blob decisions go with the gate's */
    } else
        berth_cache_invalidate(payload);
}

/* The channel is up again: revocations may have been missed while it was down, so no decision taken before counts */
static void on_channel(int up)
{
    if (up) {
        berth_gate_forget_all();
        berth_edge_decisions_forget();
    }
    berth_cache_set_enabled(up);
}

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
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "init-keys") == 0)
        return init_keys(argv[2], argc == 4 ? argv[3] : "ES256");
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
    rc = 1;                           /* the failures below */
    if (check_shared_keys(&cfg) != 0) /* before the database: nothing to wait for when the Secret is missing */
        goto Out;
    if (berth_db_open(&db, cfg.database_url, cfg.database_pool, &err) != 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        goto Out;
    }
    if (berth_db_migrate(db, &err) != 0) {
        fprintf(stderr, "berthd: schema migration failed: %s\n", err.msg);
        goto Out;
    }
    if (berth_db_set_deadline(db, cfg.database_deadline_ms, &err) != 0) { /* after the migrations, which may take longer */
        fprintf(stderr, "berthd: %s\n", err.msg);
        goto Out;
    }
    if (open_store(&cfg, &store, &err) != 0) {
        fprintf(stderr, "berthd: storage: %s\n", err.msg);
        goto Out;
    }
    berth_store_set_reserve(store, cfg.storage_min_free);
    berth_store_set_edge_prefix(store, BLOB_PREFIX, BLOB_HEAD_PREFIX);
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
    rc = serve(&cfg, db, store, &auth, &sigs);
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

/* What serve() has started, so a failure part-way and the normal drain stop exactly that, in reverse order */
typedef struct {
    int audit, pulls, isa_scan, replication, proxy, gc, retention, sqfs, webhooks, trim;
    berth_db_listener_t *listener;
    berth_workers_t *workers, *auth_workers;
    berth_janitor_t *janitor;
    berth_server_t *server;
    berth_upload_server_t *uploads;
    berth_internal_t internal; /* the listeners' sockets (removed at stop) */
    int listening;
    pid_t edge_pid;
} started_t;

/* Stop everything `st` holds, last started first: nginx stops accepting and finishes what it holds while the
 * backends stay up, then the listeners, then the threads they feed */
static void stop_started(started_t *st)
{
    if (st->pulls) /* a quitting nginx does not reopen its logs: the files stay where it writes until it is gone */
        berth_edge_pulls_pause();
    berth_edge_stop(st->edge_pid, 60);
    if (st->pulls) /* the edge has written its last lines: read them before the audit writer stops */
        berth_edge_pulls_stop();
    berth_upload_server_stop(st->uploads);
    berth_server_stop(st->server);
    if (st->listening)
        berth_internal_unlink(&st->internal);
    if (st->proxy) /* before the workers: a fetch that ends hands its requests back to them */
        berth_proxy_stop();
    berth_janitor_stop(st->janitor);
    if (st->trim)
        berth_memory_trim_stop();
    if (st->gc)
        berth_gc_stop();
    if (st->retention) /* before replication: its deletions emit events that replication reacts to */
        berth_retention_stop();
    if (st->webhooks)
        berth_webhook_stop();
    if (st->replication)
        berth_repl_stop();
    berth_workers_stop(st->workers);
    berth_workers_stop(st->auth_workers);
    if (st->isa_scan)
        berth_isa_scan_stop();
    if (st->sqfs)
        berth_sqfs_gateway_stop();
    berth_db_listen_stop(st->listener);
    if (st->audit)
        berth_audit_stop();
    *st = (started_t){.edge_pid = -1};
}

/* Wait for a signal or the edge's death; returns the exit status */
static int run_until_signal(sigset_t *sigs, started_t *st)
{
    for (;;) {
        int sig, wst;
        sigwait(sigs, &sig);
        if (sig != SIGCHLD) {
            berth_log_info("signal %d: draining", sig);
            return 0;
        }
        if (waitpid(st->edge_pid, &wst, WNOHANG) == st->edge_pid) {
            berth_edge_pulls_edge(-1); /* its pid may be another process's now */
            if (WIFSIGNALED(wst))
                berth_log_err("the edge (nginx, pid %d) was killed by signal %d; stopping", (int)st->edge_pid, WTERMSIG(wst));
            else
                berth_log_err("the edge (nginx, pid %d) exited with status %d (its error is logged above); stopping",
                              (int)st->edge_pid, WEXITSTATUS(wst));
            st->edge_pid = -1;
            return 1;
        }
    }
}

/* Run until a signal: threads, listeners and the edge; returns the exit status. Every start step is checked;
 * on a failure what was started is stopped again (stop_started) and berthd exits 1 with the reason logged. */
static int serve(berth_config_t *cfgp, berth_db_t *db, berth_store_t *store, berth_authsvc_t *authp, sigset_t *sigsp)
{
    berth_config_t cfg = *cfgp;
    berth_authsvc_t auth = *authp;
    sigset_t sigs = *sigsp;
    started_t st = {.edge_pid = -1};
    const char *failed = NULL;
    char ui_err[512];
    if (berth_edge_ui_check(cfg.ui_dir, ui_err, sizeof(ui_err)) != 0) { /* a check only: before anything starts */
        fprintf(stderr, "berthd: %s\n", ui_err);
        return 1;
    }
    berth_api_conf_t api_conf = {.project_creation_admin_only = strcmp(cfg.project_creation, "adminonly") == 0,
                                 .session_ttl = cfg.session_ttl,
                                 .external_url = cfg.external_url,
                                 .version = BERTH_VERSION};
    berth_api_configure(&api_conf);
    berth_db_projects_auto_create(cfg.projects_auto_create);
    berth_db_quota_default(cfg.quota_default);
    berth_quota_configure(cfg.quota_default, cfg.quota_warning_percent);
    berth_realm_configure(cfg.external_url_set);
    berth_registry_t reg = {.db = db, .auth = &auth, .store = store, .isa_view_disabled = !cfg.isa_view};
    berth_limits_t limits;
    berth_limits_init(&limits, cfg.edge_workers); /* before any listener or the edge: both inherit it */
    if (berth_edge_trust_init() != 0) {           /* before any listener: they believe the edge's X-Real-IP only with it */
        berth_log_err("cannot draw the edge's secret (no random bytes)");
        return 1;
    }
    /* an s3 session's body holds a pooled connection (its row locked) while it streams: at most half the pool, so
     * slow uploaders cannot starve everything else of the database; the rest get 429 and retry */
    berth_upload_limits_configure(cfg.upload_per_principal, cfg.upload_per_address, cfg.upload_connections,
                                  berth_store_upload_keeps_state(store) ? (cfg.database_pool + 1) / 2 : 0);

    if (berth_event_subscribers_install() != 0) { /* before anything that can change state starts; nothing to unwind */
        berth_log_err("cannot install the change-event subscribers");
        return 1;
    }
    /* the run directory holds the internal listeners' sockets, the edge's configuration and its temp files;
     * claimed first, so an instance refused for a run directory another one holds has started nothing */
    char lerr[512];
    if (berth_internal_listen(&st.internal, cfg.run_dir, lerr, sizeof(lerr)) != 0) {
        berth_log_err("%s", lerr);
        failed = "the internal listeners";
        goto Fail;
    }
    st.listening = 1;
    st.audit = berth_audit_start(db) == 0;
    if (!st.audit) {
        failed = "the audit log writer";
        goto Fail;
    }
    st.pulls = berth_edge_pulls_start(cfg.run_dir) == 0; /* the pulls the edge answered (a previous run's first) */
    if (!st.pulls) {
        failed = "the reader of the edge's pull log";
        goto Fail;
    }
    /* other instances' writes arrive as NOTIFY, not as events here: they only invalidate the caches */
    berth_cache_on_invalidate(berth_edge_decisions_forget_repo); /* a changed repository: the edge's kept decisions go too */
    if ((st.listener = berth_db_listen_start(cfg.database_url, on_invalidate, on_channel)) == NULL) {
        failed = "the cache invalidation listener";
        goto Fail;
    }
    st.isa_scan = berth_isa_scan_start(&reg) == 0;
    if (!st.isa_scan) {
        failed = "the ISA scanner";
        goto Fail;
    }
    /* this instance for the squashfs queue: its host and address, so a restart takes its own claims back at once */
    char host[256] = "", instance[600];
    gethostname(host, sizeof(host) - 1);
    snprintf(instance, sizeof(instance), "%s|%s", host, cfg.http_addr);
    berth_sqfs_gateway_conf_t gw = {.publish_dir = cfg.gw_publish_dir,
                                    .compressor = cfg.gw_compressor,
                                    .workers = cfg.gw_workers,
                                    .threads = cfg.gw_threads,
                                    .lease_seconds = cfg.gw_lease,
                                    .keep_devices = cfg.gw_keep_devices,
                                    .instance = instance};
    st.sqfs = berth_sqfs_gateway_start(&reg, &gw) == 0;
    if (!st.sqfs) {
        failed = "the squashfs gateway";
        goto Fail;
    }
    /* auth workers (credential work only, auth/offload.h) first: queued jobs of the others may move to them */
    if ((st.auth_workers = berth_workers_start(cfg.auth_workers)) == NULL ||
        (st.workers = berth_workers_start(cfg.workers)) == NULL) {
        failed = "the worker threads";
        goto Fail;
    }
    st.replication = start_replication(&cfg, db) == 0;
    if (!st.replication) {
        failed = "replication"; /* start_replication said why */
        goto Fail;
    }
    berth_proxy_conf_t pconf = {.workers = cfg.proxy_workers, .manifest_ttl = cfg.proxy_manifest_ttl};
    berth_err_t perr;
    st.proxy = berth_proxy_start(&reg, &pconf, &perr) == 0;
    if (!st.proxy) {
        failed = "the proxy-cache fetch threads";
        goto Fail;
    }
    st.retention = berth_retention_start(&reg) == 0;
    if (!st.retention) {
        failed = "the retention thread";
        goto Fail;
    }
    /* after replication, which loads the key that opens policies' sealed secrets */
    char hook_host[300];
    const char *ext = cfg.external_url != NULL ? strstr(cfg.external_url, "://") : NULL;
    snprintf(hook_host, sizeof(hook_host), "%s", ext != NULL ? ext + 3 : cfg.http_addr);
    hook_host[strcspn(hook_host, "/")] = '\0';
    berth_webhook_conf_t hook_conf = {.db = db,
                                      .registry_host = hook_host,
                                      .workers = cfg.wh_workers,
                                      .timeout_s = cfg.wh_timeout,
                                      .max_attempts = cfg.wh_max_attempts,
                                      .backoff_s = cfg.wh_backoff,
                                      .backoff_cap_s = cfg.wh_backoff_cap};
    st.webhooks = berth_webhook_start(&hook_conf) == 0;
    if (!st.webhooks) {
        failed = "the webhook delivery threads";
        goto Fail;
    }
    static char blobcache[4096]; /* the edge's kept slices (s3): the janitor removes those of collected blobs */
    snprintf(blobcache, sizeof(blobcache), "%s/blobcache", cfg.run_dir);
    int kept = strcmp(berth_store_driver(store), "s3") == 0 && !cfg.s3_redirect && cfg.s3_edge_cache > 0;
    if ((st.janitor = berth_janitor_start(&reg, cfg.upload_purge_interval, cfg.upload_max_age, kept ? forget_gone_slices : NULL,
                                          blobcache)) == NULL) {
        failed = "the upload janitor";
        goto Fail;
    }
    st.trim = berth_memory_trim_start(10000) == 0; /* registry/http/memory.h */
    if (!st.trim) {
        failed = "the memory trimming thread";
        goto Fail;
    }
    berth_gc_conf_t gc_conf = {.database_url = cfg.database_url,
                               .grace_seconds = cfg.gc_grace,
                               .lease_seconds = cfg.gc_lease,
                               .batch = cfg.gc_batch,
                               .interval_ms = cfg.gc_interval * 1000L};
    berth_err_t gc_err;
    st.gc = berth_gc_start(&reg, &gc_conf, &gc_err) == 0;
    if (!st.gc) {
        berth_log_err("garbage collector: %s", gc_err.msg);
        failed = "the garbage collector";
        goto Fail;
    }
    int api_fds[] = {st.internal.api_fd, st.internal.api_backup_fd};
    if (berth_server_start(&st.server, &reg, st.workers, st.auth_workers, cfg.auth_queue, cfg.loops, api_fds,
                           st.internal.api_backup_fd >= 0 ? 2 : 1) != 0) {
        failed = "the internal API listener (h2o)";
        goto Fail;
    }
    if (berth_upload_server_start(&st.uploads, &reg, (unsigned)cfg.upload_connections, (unsigned)cfg.upload_idle_timeout,
                                  st.internal.upload_fd) != 0) {
        failed = "the internal upload listener (libmicrohttpd)";
        goto Fail;
    }
    berth_store_edge_t where;
    berth_store_edge(store, &where);
    berth_edge_conf_t edge = {
        .nginx = cfg.nginx,
        .run_dir = cfg.run_dir,
        .listen = cfg.http_addr,
        .tls_listen = cfg.tls_addr,
        .tls_cert = cfg.tls_cert,
        .tls_key = cfg.tls_key,
        .blob_root = where.dir,
        .blob_upstream = where.upstream,
        .blob_host = where.host,
        .blob_timeout_s = (cfg.s3_timeout_ms + 999) / 1000,
        .blob_tls_verify = cfg.s3_tls_verify,
        .blob_ca_file = cfg.s3_ca_file,
        .blob_prefix = BLOB_PREFIX,
        .blob_head_prefix = BLOB_HEAD_PREFIX,
        .blob_cache_bytes = cfg.s3_redirect ? 0 : cfg.s3_edge_cache,
        .blob_cache_min_free = cfg.storage_min_free,
        .api_upstream = st.internal.api,
        .api_backup = st.internal.api_backup,
        .upload_upstream = st.internal.upload,
        .upload_idle_timeout = cfg.upload_idle_timeout,
        .upload_connections = cfg.upload_connections,
        .workers = cfg.edge_workers,
        .decision_cache = cfg.edge_decision_cache,
        .decision_inodes = cfg.edge_decision_inodes,
        .ui_dir = cfg.ui_dir,
        .limits = &limits,
    };
    if ((st.edge_pid = berth_edge_start(&edge)) < 0) {
        failed = "the edge (nginx)";
        goto Fail;
    }
    berth_edge_pulls_edge(st.edge_pid);
    berth_log_info("berthd listening on %s%s%s (api %s, uploads %s, edge pid %d)", cfg.http_addr, cfg.tls_addr ? ", TLS " : "",
                   cfg.tls_addr ? cfg.tls_addr : "", st.internal.api, st.internal.upload, (int)st.edge_pid);
    int status = run_until_signal(&sigs, &st);
    stop_started(&st);
    berth_log_info("stopped");
    return status;
Fail:
    berth_log_err("cannot start %s; stopping what was started", failed);
    stop_started(&st);
    return 1;
}
