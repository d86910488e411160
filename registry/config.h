/* berthd configuration: YAML file, then BERTH_* environment overrides, then validation. */
#ifndef BERTH_CONFIG_H
#define BERTH_CONFIG_H

#include <stddef.h>

typedef struct st_berth_config_t {
    char *http_addr;            /* http.addr            BERTH_HTTP_ADDR */
    char *tls_addr;             /* http.tls_addr        BERTH_TLS_ADDR */
    char *tls_cert;             /* http.tls_cert */
    char *tls_key;              /* http.tls_key */
    char *external_url;         /* external_url         BERTH_EXTERNAL_URL (default http://<http.addr>) */
    int external_url_set;       /* it was configured: token realms use it (else the scheme and Host the client used) */
    char *database_url;         /* database.url         BERTH_DATABASE_URL */
    int database_pool;          /* database.pool */
    int database_deadline_ms;   /* database.deadline_ms BERTH_DATABASE_DEADLINE_MS: per round trip (5000) */
    char *storage_root;         /* storage.root         BERTH_STORAGE_ROOT */
    long long storage_min_free; /* storage.min_free_bytes BERTH_STORAGE_MIN_FREE: upload reserve; -1 default */
    char *storage_driver;       /* storage.driver       BERTH_STORAGE_DRIVER: filesystem (default) or s3 */
    /* storage.s3.* (BERTH_S3_*): the bucket blobs live in with storage.driver s3 (registry/storage/store_s3.c) */
    char *s3_endpoint, *s3_region, *s3_bucket, *s3_prefix, *s3_access_key, *s3_secret_key_file, *s3_secret_key, *s3_ca_file;
    int s3_path_style;         /* storage.s3.path_style: host/bucket/key (default false: bucket.host/key) */
    int s3_part_size_mib;      /* storage.s3.part_size_mib (16, at least 5) */
    int s3_redirect;           /* storage.s3.redirect: blob GETs answer 307 to a presigned URL (false: the edge streams) */
    long long s3_edge_cache;   /* storage.s3.edge_cache_bytes BERTH_S3_EDGE_CACHE: blob bytes the edge keeps (8 GiB; 0 off) */
    int s3_tls_verify;         /* storage.s3.tls_verify (true) */
    int s3_timeout_ms;         /* storage.s3.timeout_ms: per request without a body stream, and per stall (30000) */
    int s3_retries;            /* storage.s3.retries on 500/503/SlowDown (3) */
    char *run_dir;             /* run_dir (default <storage.root>/run) */
    char *admin_password;      /* admin_password       BERTH_ADMIN_PASSWORD (initial admin; used by auth) */
    char *log_level;           /* log.level */
    char *access_log;          /* log.access: "-" stdout, a path, or "" off */
    char *nginx;               /* edge.nginx */
    int loops;                 /* server.loops */
    int workers;               /* server.workers */
    int auth_workers;          /* server.auth_workers: password hashing and LDAP, apart from everything else (6) */
    int auth_queue;            /* server.auth_queue: requests waiting for them; more are shed with 503 (64) */
    int edge_workers;          /* edge.workers */
    int edge_decision_inodes;  /* edge.decision_inodes BERTH_EDGE_DECISION_INODES: links and their directories (65536) */
    int edge_decision_cache;   /* edge.decision_cache BERTH_EDGE_DECISION_CACHE: the edge keeps blob decisions ~1 s (true) */
    int edge_allow_root;       /* edge.allow_root     BERTH_EDGE_ALLOW_ROOT: berthd (and so nginx) may run as root (false) */
    char *ui_dir;              /* ui.dir               BERTH_UI_DIR: built web UI (webui/build.sh) served at "/"; unset: none */
    int upload_connections;    /* uploads.max_connections: threads of the upload listener */
    int upload_per_principal;  /* uploads.max_per_principal: bodies one user or robot may stream at once */
    int upload_per_address;    /* uploads.max_per_address: bodies one client address may stream at once */
    int upload_idle_timeout;   /* uploads.idle_timeout_seconds: a stalled body is cut after this */
    int upload_max_age;        /* uploads.max_age_seconds: idle sessions older than this are purged */
    int upload_purge_interval; /* uploads.purge_interval_seconds */
    char *keys_dir;            /* auth.keys_dir: token signing key and certificate (default <storage.root>/keys) */
    char *token_issuer;        /* auth.issuer */
    char *token_service;       /* auth.service */
    int token_ttl;             /* auth.token_ttl_seconds */
    int decision_ttl;          /* auth.decision_ttl_seconds  BERTH_AUTH_DECISION_TTL: the revocation window (10) */
    char *token_alg;           /* auth.token_algorithm  BERTH_TOKEN_ALGORITHM: ES256 (default) or RS256 */
    int session_ttl;           /* auth.session_ttl_seconds: browser sessions */
    char *project_creation;    /* projects.creation  BERTH_PROJECT_CREATION: adminonly (default) or everyone */
    int projects_auto_create;  /* projects.auto_create BERTH_PROJECTS_AUTO_CREATE: a push may create its project (false) */
    long long quota_default;   /* quota.default_storage_limit BERTH_QUOTA_DEFAULT_STORAGE_LIMIT: bytes, -1 unlimited (-1) */
    int quota_warning_percent; /* quota.warning_percent BERTH_QUOTA_WARNING_PERCENT: QUOTA_WARNING line, 1-100 (85) */
    /* ldap.* (issue #3): off unless ldap.url is set; Harbor's LDAP settings */
    char *ldap_url, *ldap_search_dn, *ldap_search_password_file, *ldap_base_dn, *ldap_filter, *ldap_uid, *ldap_scope;
    char *ldap_ca_file, *ldap_group_base_dn, *ldap_group_filter, *ldap_group_name_attr, *ldap_membership_attr;
    char *ldap_group_admin_dn;
    int ldap_starttls, ldap_timeout, ldap_verify_cert;
    int ldap_max_concurrent;  /* ldap.max_concurrent: directory exchanges at once (3) */
    int ldap_session_recheck; /* ldap.session_recheck_seconds: browser sessions re-checked this often (300) */
    int isa_view;             /* isa.view BERTH_ISA_VIEW: serve /v2/_isa/<level>/… (default true) */
    int repl_workers;         /* replication.workers: transfer threads (2) */
    char *repl_key_file;      /* replication.key_file: AES key for endpoint secrets (default <keys_dir>/replication.key) */
    int repl_chunk;           /* replication.chunk_kib: blob chunk size in KiB (8192) */
    int proxy_workers;        /* proxy.workers: proxy-cache upstream fetches at once (4) */
    int proxy_manifest_ttl;   /* proxy.manifest_ttl BERTH_PROXY_MANIFEST_TTL: seconds between upstream checks of a tag (60) */
    int gc_grace;             /* gc.grace_seconds BERTH_GC_GRACE_SECONDS: unreferenced this long before GC deletes (7200) */
    int gc_lease;             /* gc.lease_seconds BERTH_GC_LEASE_SECONDS: a silent run holder is replaced after this (60) */
    int gc_batch;             /* gc.batch BERTH_GC_BATCH: rows per sweep transaction (1000) */
    int gc_interval;          /* gc.interval_seconds BERTH_GC_INTERVAL_SECONDS: how often GC looks for runs (20) */
    /* webhook.* (issue 14): delivery of the outbox (docs/webhooks.md) */
    int wh_workers;      /* webhook.workers BERTH_WEBHOOK_WORKERS: delivery threads, 1 to 16 (2) */
    int wh_timeout;      /* webhook.timeout_seconds BERTH_WEBHOOK_TIMEOUT_SECONDS: per attempt, 1 to 3600 (10) */
    int wh_max_attempts; /* webhook.max_attempts BERTH_WEBHOOK_MAX_ATTEMPTS: before a task is Error, 1 to 1000 (10) */
    int wh_backoff;      /* webhook.backoff_seconds BERTH_WEBHOOK_BACKOFF_SECONDS: first retry after this, doubling (1) */
    int wh_backoff_cap;  /* webhook.backoff_cap_seconds BERTH_WEBHOOK_BACKOFF_CAP_SECONDS: retries at most this apart (600) */
    /* gateway.* (issue 15): the HPC squashfs conversions */
    char *gw_publish_dir; /* gateway.publish_dir BERTH_GATEWAY_PUBLISH_DIR: <project>/<repo>/<digest>.sqsh here (unset: none) */
    char *gw_compressor;  /* gateway.compressor BERTH_GATEWAY_COMPRESSOR: zstd (default), gzip, xz, lz4 */
    int gw_workers;       /* gateway.workers: conversions at once (1) */
    int gw_threads;       /* gateway.threads: compressor threads per conversion (0: CPUs) */
    int gw_lease;         /* gateway.lease_seconds BERTH_GATEWAY_LEASE_SECONDS: a silent claim is taken up after this (60) */
    int gw_keep_devices;  /* gateway.keep_devices: keep character and block devices (false) */
} berth_config_t;

/**
 * Load `path` (may be NULL: defaults only), apply the environment, validate.
 * On error returns -1 and writes one line into errbuf.
 */
int berth_config_load(berth_config_t *cfg, const char *path, char *errbuf, size_t errlen);
void berth_config_dispose(berth_config_t *cfg);

#endif
