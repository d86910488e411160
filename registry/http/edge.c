#include "registry/http/edge.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/x509.h>

#include "core/log.h"
#include "registry/http/edge_blobs.h"
#include "registry/http/edge_pulls.h"
#include "registry/http/edge_trust.h"
#include "registry/http/edge_ui.h"
#include "registry/http/memory.h"

#define OCI_413 "{\"errors\":[{\"code\":\"SIZE_INVALID\",\"message\":\"request body too large\",\"detail\":{}}]}"
#define OCI_404 "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\",\"message\":\"blob unknown to registry\",\"detail\":{}}]}"
/* a Range past the blob's end (Distribution's code for it) */
#define OCI_416 "{\"errors\":[{\"code\":\"RANGE_INVALID\",\"message\":\"requested range not satisfiable\",\"detail\":{}}]}"
/* requests nginx refuses before berthd sees them: a malformed request line or header, headers over its buffers
 * (494), a URI over them (414); clients parse errors as JSON */
#define OCI_400 "{\"errors\":[{\"code\":\"BAD_REQUEST\",\"message\":\"malformed request, or headers too large\",\"detail\":{}}]}"
#define OCI_414 "{\"errors\":[{\"code\":\"BAD_REQUEST\",\"message\":\"request URI too long\",\"detail\":{}}]}"
#define OCI_502 "{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"service temporarily unavailable\",\"detail\":{}}]}"

/* An https gateway is verified as berthd's own S3 client verifies it (storage.s3.tls_verify, ca_file), by the name
 * the presigned URLs were signed for: nginx's default is to verify nothing and send no SNI. */
static void gateway_tls(FILE *f, const berth_edge_conf_t *c)
{
    if (strncmp(c->blob_upstream, "https://", 8) != 0)
        return;
    if (!c->blob_tls_verify) {
        fprintf(f, "      proxy_ssl_verify off;\n");
        return;
    }
    const char *ca = c->blob_ca_file;
    if (ca == NULL || ca[0] == '\0')
        ca = getenv(X509_get_default_cert_file_env()); /* SSL_CERT_FILE, as libcurl's OpenSSL reads it */
    if (ca == NULL || ca[0] == '\0')
        ca = X509_get_default_cert_file();
    const char *h = c->blob_host, *colon = strrchr(h, ':'), *bracket = strchr(h, ']');
    int n = colon != NULL && (bracket == NULL || colon > bracket) ? (int)(colon - h) : (int)strlen(h);
    fprintf(f,
            "      proxy_ssl_verify on; proxy_ssl_verify_depth 8;\n"
            "      proxy_ssl_trusted_certificate \"%s\";\n"
            "      proxy_ssl_server_name on; proxy_ssl_name %.*s;\n",
            ca, n, h);
}

/* s3 driver: what the edge proxies from the gateway it keeps on local disk, in slices of BLOB_SLICE keyed by the
 * object's path (a content address: every presigned URL of one blob names the same path), so a blob thousands of nodes
 * pull leaves the gateway once per edge and is then sent from the page cache with sendfile. nginx evicts the least
 * recently used slices past max_size or below min_free, and any slice not sent for a day. berthd still decides every
 * request: a refused or deleted blob never reaches these locations, whatever the cache holds; the slices of a blob GC
 * collected leave every instance's disk at its janitor's next pass (edge_cache.h). */
#define BLOB_SLICE "32m"

static int blob_cache_on(const berth_edge_conf_t *c)
{
    return c->blob_root == NULL && c->blob_cache_bytes > 0;
}

static void blob_cache_http(FILE *f, const berth_edge_conf_t *c)
{
    long long min_free = c->blob_cache_min_free;
    struct statvfs v;
    if (min_free < 0) { /* storage.min_free_bytes' default: min(1 GiB, 2 % of the file system) */
        min_free = 1LL << 30;
        if (statvfs(c->run_dir, &v) == 0 && (long long)v.f_blocks * (long long)v.f_frsize / 50 < min_free)
            min_free = (long long)v.f_blocks * (long long)v.f_frsize / 50;
    }
    /* a key per 256 KiB kept (small configs and layers take one each); nginx holds ~8,000 keys per MiB of zone */
    long long zone_mib = c->blob_cache_bytes / (256 << 10) / 8000 + 1;
    fprintf(f,
            "  proxy_cache_path %s/blobcache levels=1:2 keys_zone=berth_blobs:%lldm max_size=%lld min_free=%lld inactive=1d "
            "use_temp_path=off;\n",
            c->run_dir, zone_mib < 4 ? 4 : zone_mib, c->blob_cache_bytes, min_free);
}

static void blob_cache_location(FILE *f, int timeout_s)
{
    /* clients waiting for a slice another request is fetching wait for it as long as a gateway may take to send
     * it (nginx's default, 5 s, sends every waiter to the gateway once a slice takes longer: a slow gateway got
     * one GET per waiting client, and none of them kept); a fetch that dies releases the lock at once */
    int lock_s = timeout_s * 10 > 300 ? timeout_s * 10 : 300;
    fprintf(f,
            "      slice " BLOB_SLICE ";\n"
            "      proxy_cache berth_blobs;\n"
            "      proxy_cache_key $uri$slice_range;\n"
            "      proxy_set_header Range $slice_range;\n"
            "      proxy_cache_valid 200 206 30d;\n"
            "      proxy_cache_lock on; # one gateway GET per slice however many clients ask for it at once\n"
            "      proxy_cache_lock_timeout %ds; proxy_cache_lock_age %ds;\n"
            "      proxy_ignore_headers Cache-Control Expires Set-Cookie Vary X-Accel-Expires X-Accel-Redirect X-Accel-Limit-Rate "
            "X-Accel-Buffering X-Accel-Charset;\n"
            "      proxy_buffering on;\n"
            /* a kept slice's descriptor is not kept open: a file removed from the cache is gone at once */
            "      open_file_cache off;\n",
            lock_s, lock_s);
}

/* s3: the bytes come from the gateway through a presigned URL (the client's Range goes along, or the slice's); the
 * client's credentials do not */
static void s3_location(FILE *f, const berth_edge_conf_t *c, const char *prefix, int cached)
{
    fprintf(f, "    location %s {\n", prefix);
    gateway_tls(f, c);
    if (cached)
        blob_cache_location(f, c->blob_timeout_s);
    else
        fprintf(f, "      proxy_buffering off;\n"
                   "      proxy_set_header Range $http_range;\n");
    /* nginx's error lines name the upstream URL, signature included: a presigned URL in a log is a key to the blob.
     * A gateway that fails is seen by the client (503) and by GET /api/v2.0/health, not in these lines */
    fprintf(f,
            "      internal;\n"
            "      error_log stderr crit;\n"
            "      set $blob_digest $upstream_http_docker_content_digest; # berthd's answer, before the gateway's\n"
            /* only what the signature needs: nothing of the client's reaches the gateway (and a kept slice) */
            "      proxy_pass_request_headers off;\n"
            /* no upstream keep-alive: on a reused connection RGW (Nagle on by default) and nginx's delayed ACK
             * hold every small blob ~40 ms; bulk pulls gain nothing from it (docs/benchmarks.md) */
            "      proxy_pass %s/;\n"
            "      proxy_http_version 1.1;\n"
            "      proxy_set_header Host \"%s\";\n"
            "      proxy_set_header Connection \"\";\n"
            "      proxy_connect_timeout %ds; proxy_read_timeout %ds;\n"
            "      proxy_intercept_errors on;\n"
            "      proxy_hide_header etag;\n"
            "      proxy_hide_header content-type; # berthd's application/octet-stream, not the gateway's stored guess\n"
            "      proxy_hide_header x-amz-request-id;\n"
            "      proxy_hide_header x-rgw-object-type;\n"
            "      proxy_hide_header last-modified;\n"
            "      add_header docker-content-digest $blob_digest always;\n"
            "      add_header etag \"\\\"$blob_digest\\\"\" always;\n"
            "      add_header docker-distribution-api-version registry/2.0 always;\n"
            "      add_header cache-control \"max-age=31536000\" always;\n"
            "      error_page 404 = @blob_unknown;\n"
            "      error_page 416 = @blob_range;\n"
            "      error_page 403 500 502 503 504 = @blob_unavailable;\n"
            "    }\n",
            c->blob_upstream, c->blob_host, c->blob_timeout_s, c->blob_timeout_s);
}

static int write_conf(const berth_edge_conf_t *c, const char *path, int fast_blobs)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fchmod(fileno(f), 0600); /* it holds the secret that makes berthd believe the edge's X-Real-IP */
    /* every idle keep-alive connection to the upload listener holds one of its threads: the pools of all
     * workers together keep at most a quarter of them */
    int upload_keepalive = c->upload_connections / (4 * (c->workers > 0 ? c->workers : 1));
    upload_keepalive = upload_keepalive < 1 ? 1 : upload_keepalive > 64 ? 64 : upload_keepalive;
    char backup[256] = "";
    int api_conns = c->limits->upstream_max_conns, spare = 0;
    if (c->api_backup != NULL && c->api_backup[0] != '\0') {
        berth_limits_api_split(c->limits, BERTH_EDGE_UPSTREAM_IDLE + upload_keepalive, &api_conns, &spare);
        snprintf(backup, sizeof(backup), " server %s max_conns=%d max_fails=0 backup;", c->api_backup, spare);
    }
    /* nginx workers must read the blob files berthd wrote; run them as berthd's own user */
    fprintf(f,
            "# generated by berthd at every start; edit deploy/ or the berthd config instead\n"
            "%s"
            "worker_processes %d;\n"
            /* the blob location's regexes and the credential map run on every request: compiled, they cost the
             * edge ~1 us less per small blob GET (wrk -c64, 31.3 against 32.6 us of CPU) */
            "pcre_jit on;\n"
            "daemon off;\n"
            "pid %s/nginx.pid;\n"
            "error_log stderr warn;\n"
            "worker_rlimit_nofile %ld;\n"
            "events { worker_connections %d; }\n"
            "http {\n"
            "  access_log off;\n"
            "  server_tokens off;\n"
            "  sendfile on; tcp_nopush on; tcp_nodelay on;\n"
            "  keepalive_requests 1000000; keepalive_timeout 75s;\n"
            "  open_file_cache max=20000 inactive=60s;\n"
            "  client_body_temp_path %s/body; proxy_temp_path %s/proxy; fastcgi_temp_path %s/fastcgi;\n"
            "  uwsgi_temp_path %s/uwsgi; scgi_temp_path %s/scgi;\n"
            "  client_max_body_size 8m; client_body_buffer_size 1m;\n"
            "  proxy_http_version 1.1;\n"
            "  " BERTH_EDGE_PROXY_HEADERS " proxy_set_header " BERTH_EDGE_TRUST_HEADER " %s;\n"
            /* nginx answers Expect itself and does not pass it on: the upload listener needs to know whether a
             * refused client waits for the answer before it sends its body (registry/service/upload.h) */
            "  proxy_set_header X-Berth-Expect $http_expect;\n"
            "  proxy_buffer_size 64k; proxy_buffers 8 64k;\n"
            /* the hash of the proxy_set_header lines plus nginx's hidden headers: its 64-byte default buckets are
             * too small for them, and nginx warned about it at every start */
            "  proxy_headers_hash_bucket_size 128;\n"
            /* a pool of idle keep-alive connections per worker; max_conns keeps berthd under its descriptor limit,
             * past it a client gets 503 + Retry-After (@unavailable) instead of berthd failing accept() */
            /* idle ones close before h2o's own 10 s keep-alive timeout: a request sent on a connection that h2o
             * is closing at that moment fails, and nginx does not retry one that is not idempotent */
            /* max_fails=0: a full queue on the socket (internal_listen.h) sends the request to the backup port and
             * never takes the socket out of use */
            "  upstream berth_api { server %s max_conns=%d max_fails=0;%s keepalive %d; keepalive_timeout 5s; }\n"
            /* idle upstream connections close before the upload listener's own timeout cuts them under nginx */
            "  upstream berth_upload { server %s max_conns=%d; keepalive %d; keepalive_timeout %ds; }\n",
            geteuid() == 0 ? "user root;\n" : "", c->workers, c->run_dir, c->limits->worker_nofile, c->limits->worker_connections,
            c->run_dir, c->run_dir, c->run_dir, c->run_dir, c->run_dir, berth_edge_trust_secret(), c->api_upstream, api_conns,
            backup, BERTH_EDGE_UPSTREAM_IDLE, c->upload_upstream, c->limits->upstream_max_conns, upload_keepalive,
            c->upload_idle_timeout);
    if (fast_blobs)
        berth_edge_decisions_http(f);
    if (blob_cache_on(c))
        blob_cache_http(f, c);
    fprintf(f,
            "  server {\n"
            "    listen %s backlog=%d reuseport;\n",
            c->listen, c->limits->backlog);
    if (c->tls_listen != NULL)
        fprintf(f,
                "    listen %s ssl http2 backlog=%d reuseport;\n"
                "    ssl_certificate %s; ssl_certificate_key %s;\n"
                "    ssl_protocols TLSv1.2 TLSv1.3;\n",
                c->tls_listen, c->limits->backlog, c->tls_cert, c->tls_key);
    fprintf(f,
            "    error_page 400 494 /.berth/bad-request;\n"
            "    error_page 414 /.berth/uri-too-long;\n"
            "    error_page 413 = @too_big;\n"
            "    error_page 500 502 504 = @unavailable; # nginx's own 500s: out of descriptors or memory\n"
            "    location = /.berth/bad-request { internal; default_type application/json; return 400 '%s'; }\n"
            "    location = /.berth/uri-too-long { internal; default_type application/json; return 414 '%s'; }\n"
            "    location @too_big { default_type application/json; return 413 '%s'; }\n"
            "    location @unavailable { default_type application/json; add_header retry-after 2 always; return 503 '%s'; }\n"
            "    location @blob_unknown { default_type application/json; return 404 '%s'; }\n"
            "    location @blob_range { default_type application/json; return 416 '%s'; }\n"
            /* uploads: stream, never buffer; the body can be any size and take any time, but a body that stalls
             * is cut after uploads.idle_timeout_seconds: each one holds a thread of the upload listener */
            "    location ~ ^/v2/.+/blobs/uploads(/|$) {\n"
            "      client_max_body_size 0;\n"
            "      proxy_request_buffering off;\n"
            "      proxy_buffering off;\n"
            "      client_body_timeout %ds; proxy_read_timeout 3600s; proxy_send_timeout 3600s;\n"
            "      proxy_pass http://berth_upload;\n"
            "    }\n",
            OCI_400, OCI_414, OCI_413, OCI_502, OCI_404, OCI_416, c->upload_idle_timeout);
    if (fast_blobs) {
        char pulls[4096];
        snprintf(pulls, sizeof(pulls), "%s/" BERTH_EDGE_PULLS_DIR "/" BERTH_EDGE_PULLS_LOG, c->run_dir);
        berth_edge_decisions_locations(f, berth_edge_decisions_path(), pulls);
    }
    berth_edge_ui_locations(f, c->ui_dir);
    if (c->blob_root != NULL) {
        fprintf(f,
                "    location %s {\n"
                "      internal;\n"
                "      alias %s/;\n",
                c->blob_prefix, c->blob_root);
        berth_edge_blob_headers(f, "$upstream_http_docker_content_digest");
        fprintf(f, "      error_page 404 = @blob_unknown;\n"
                   "      error_page 416 = @blob_range;\n"
                   "    }\n");
    } else {
        s3_location(f, c, c->blob_prefix, blob_cache_on(c));
        s3_location(f, c, c->blob_head_prefix, 0); /* a HEAD asks the gateway: the object may be gone behind Berth's back */
        fprintf(f,
                "    location @blob_unavailable {\n"
                "      default_type application/json;\n"
                "      add_header retry-after 5 always;\n"
                "      return 503 '{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"the object store does not answer\"}]}';\n"
                "    }\n");
    }
    fprintf(f, "  }\n}\n");
    int rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -1;
    fclose(f);
    return rc;
}

pid_t berth_edge_start(const berth_edge_conf_t *c)
{
    char path[4096];
    const char *sub[] = {"", "/body", "/proxy", "/fastcgi", "/uwsgi", "/scgi"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", c->run_dir, sub[i]);
        if (mkdir(path, 0750) != 0 && errno != EEXIST) {
            berth_log_err("cannot create %s: %s", path, strerror(errno));
            return -1;
        }
    }
    /* the fast path for blobs by digest: the file system driver's files only, and only on a tmpfs */
    int fast_blobs =
        c->blob_root != NULL && c->decision_cache && berth_edge_decisions_dir(c->run_dir, c->blob_root, c->decision_inodes) == 0;
    snprintf(path, sizeof(path), "%s/nginx.conf", c->run_dir);
    if (write_conf(c, path, fast_blobs) != 0) {
        berth_log_err("cannot write %s", path);
        return -1;
    }
    char *const *env = berth_memory_edge_env(); /* built before fork: the child only execs */
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        /* if berthd dies (even by SIGKILL) the edge must not outlive it and answer for a dead backend */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1)
            _exit(1);
        execle(c->nginx, "nginx", "-q", "-p", c->run_dir, "-c", path, (char *)NULL, env);
        fprintf(stderr, "berthd: cannot run %s: %s\n", c->nginx, strerror(errno));
        _exit(127);
    }
    if (pid < 0)
        berth_log_err("cannot start nginx: fork: %s", strerror(errno));
    return pid;
}

static void stopped(void)
{
    berth_edge_decisions_remove();
}

void berth_edge_stop(pid_t pid, int timeout_s)
{
    if (pid <= 0)
        return;
    kill(pid, SIGQUIT);
    for (int i = 0; i < timeout_s * 10; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            stopped();
            return;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    berth_log_warn("edge did not stop in %d s; killing it", timeout_s);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    stopped();
}
