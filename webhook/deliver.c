/* Webhook delivery (webhook.h): fan-out, claim, POST, record, on core/bgloop threads. */
#include "webhook/webhook.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/bgloop.h"
#include "core/err.h"
#include "core/log.h"
#include "replication/replication.h"
#include "sql/api.h"

#include "sql/webhook.h"

#define MAX_WORKERS 16
#define DISPATCH_BATCH "200"
#define POLL_MS 1000 /* pulls (queued by the audit writer) and other berthd's changes are found by polling */

const char *const berth_webhook_event_types[] = {"PUSH_ARTIFACT", "PULL_ARTIFACT",      "DELETE_ARTIFACT",
                                                 "QUOTA_EXCEED",  "QUOTA_WARNING",      "TAG_RETENTION",
                                                 "REPLICATION",   "ISA_SCAN_COMPLETED", NULL};

int berth_webhook_event_type_known(const char *type)
{
    for (const char *const *t = berth_webhook_event_types; *t != NULL; t++)
        if (strcmp(*t, type) == 0)
            return 1;
    return 0;
}

int berth_webhook_address_ok(const char *url)
{
    return berth_repl_http_url(url);
}

const char *berth_webhook_address_refused(const char *url)
{
    if (!berth_webhook_address_ok(url))
        return "target address must be an http:// or https:// URL";
    if (strlen(url) > 2048)
        return "target address must be at most 2048 bytes";
    CURLU *u = curl_url();
    char *host = NULL, *user = NULL, *pass = NULL;
    const char *why = NULL;
    if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host == NULL || host[0] == '\0')
        why = "target address must be an http:// or https:// URL with a host";
    else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK || curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK)
        why = "target address must not carry credentials: send them as auth_header";
    curl_free(host);
    curl_free(user);
    curl_free(pass);
    curl_url_cleanup(u);
    return why;
}

void berth_webhook_sign(char out[72], const char *secret, const char *timestamp, const char *body, size_t len)
{
    /* one buffer: HMAC() is the one-shot form OpenSSL 3 keeps (the HMAC_CTX calls are deprecated) */
    size_t tlen = strlen(timestamp);
    unsigned char *msg = malloc(tlen + 2 + len), mac[EVP_MAX_MD_SIZE];
    snprintf((char *)msg, tlen + 2, "%s.", timestamp);
    memcpy(msg + tlen + 1, body, len);
    unsigned int maclen = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, tlen + 1 + len, mac, &maclen);
    free(msg);
    memcpy(out, "sha256=", 7);
    out[7] = '\0';
    for (unsigned i = 0; i < maclen && i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", mac[i]);
}

static struct {
    berth_webhook_conf_t conf;
    char host[256];
    berth_bgloop_t *loops[MAX_WORKERS];
    char claimer[MAX_WORKERS][96];
    int n;        /* loops started: published with release after loops[n-1] is set */
    int stopping; /* set before the loops are stopped: a long tick gives up between attempts */
} W;

void berth_webhook_wake(void)
{
    int n = __atomic_load_n(&W.n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        berth_bgloop_wake(W.loops[i]);
}

/* One statement on a pooled connection; 0 with *json (malloc'd or NULL) and *affected */
static int run(berth_q_t q, const char *const *p, char **json, long *affected)
{
    berth_err_t err;
    berth_err_clear(&err);
    if (json != NULL)
        *json = NULL;
    berth_dbconn_t *c = berth_db_acquire(W.conf.db, &err);
    if (c == NULL) /* not logged: the pool reports the outage, and we ask again each second */
        return BERTH_EUNAVAIL;
    berth_db_json_t r;
    int rc = berth_db_api(c, q, p, &r, &err);
    berth_db_release(W.conf.db, c);
    if (rc != 0) {
        berth_log_warn("webhook: %s failed: %s", berth_sql_name((int)q), err.msg);
        return rc;
    }
    if (affected != NULL)
        *affected = r.affected;
    if (json != NULL)
        *json = r.json;
    else
        free(r.json);
    return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *data)
{
    (void)p;
    (void)data;
    return size * n;
}

/* One attempt: 0 when the receiver answered 2xx; *status the HTTP status (0 none), `why` says what happened */
static int post(json_t *t, const char *body, long *status, char *why, size_t whysz)
{
    const char *addr = json_string_value(json_object_get(t, "address"));
    const char *sealed = json_string_value(json_object_get(t, "secret"));
    const char *auth_sealed = json_string_value(json_object_get(t, "auth_sealed"));
    const char *ca = json_string_value(json_object_get(t, "ca_file"));
    const char *format = json_string_value(json_object_get(t, "format"));
    *status = 0;
    if (addr == NULL || !berth_webhook_address_ok(addr)) { /* checked at creation; a row edited in SQL is refused here */
        snprintf(why, whysz, "refused: the address is not an http(s) URL");
        return -1;
    }
    char *secret = sealed != NULL ? berth_repl_open(sealed) : NULL;
    char *auth = auth_sealed != NULL ? berth_repl_open(auth_sealed) : NULL;
    if (secret == NULL || (auth_sealed != NULL && auth == NULL)) {
        snprintf(why, whysz, "cannot open the policy's sealed secret (replication.key_file changed?)");
        free(secret);
        free(auth);
        return -1;
    }
    char ts[24], sig[72], line[4200];
    snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
    berth_webhook_sign(sig, secret, ts, body, strlen(body));
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, format != NULL && strcmp(format, "CloudEvents") == 0 ? "Content-Type: application/cloudevents+json"
                                                                                  : "Content-Type: application/json");
    snprintf(line, sizeof(line), "X-Berth-Event-Id: %s", json_string_value(json_object_get(t, "event_id")));
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "X-Berth-Event-Type: %s", json_string_value(json_object_get(t, "event_type")));
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "X-Berth-Timestamp: %s", ts);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "X-Berth-Signature: %s", sig);
    h = curl_slist_append(h, line);
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (auth != NULL && auth[0] != '\0') {
        snprintf(line, sizeof(line), "Authorization: %s", auth);
        h = curl_slist_append(h, line);
        OPENSSL_cleanse(line, sizeof(line));
    }
    CURL *c = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, addr);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect is an answer, not a new target */
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(c, CURLOPT_USERAGENT, "berth-webhook");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, W.conf.timeout_s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, W.conf.timeout_s < 5 ? W.conf.timeout_s : 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    if (json_is_true(json_object_get(t, "skip_cert_verify"))) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (ca != NULL && ca[0] != '\0') {
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    }
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    OPENSSL_cleanse(secret, strlen(secret));
    free(secret);
    if (auth != NULL) {
        OPENSSL_cleanse(auth, strlen(auth));
        free(auth);
    }
    if (cc != CURLE_OK) {
        snprintf(why, whysz, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
        return -1;
    }
    snprintf(why, whysz, "HTTP %ld", *status);
    return *status >= 200 && *status < 300 ? 0 : -1;
}

/* Claim one due task and deliver it; 1 when there was one */
static int deliver_one(int idx)
{
    char lease[32], *json;
    snprintf(lease, sizeof(lease), "%ld", W.conf.timeout_s + 5); /* past it, another thread or berthd takes the task */
    const char *cp[] = {W.claimer[idx], W.host, lease};
    if (run(BERTH_Q_WH_CLAIM, cp, &json, NULL) != 0 || json == NULL)
        return 0;
    json_t *t = json_loads(json, 0, NULL);
    free(json);
    if (t == NULL)
        return 0;
    const char *body = json_string_value(json_object_get(t, "body"));
    long status = 0;
    char why[CURL_ERROR_SIZE + 64], line[CURL_ERROR_SIZE + 200], id[24], code[16], max[16], base[32], cap[32];
    int ok = body != NULL && post(t, body, &status, why, sizeof(why)) == 0;
    if (body == NULL)
        snprintf(why, sizeof(why), "no payload");
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    long long attempt = json_integer_value(json_object_get(t, "attempts"));
    snprintf(line, sizeof(line), "%s attempt %lld to %s: %s", when, attempt, json_string_value(json_object_get(t, "address")), why);
    snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(t, "id")));
    snprintf(code, sizeof(code), "%ld", status);
    snprintf(max, sizeof(max), "%d", W.conf.max_attempts);
    snprintf(base, sizeof(base), "%g", W.conf.backoff_s);
    snprintf(cap, sizeof(cap), "%g", W.conf.backoff_cap_s);
    if (!ok)
        berth_log_info("webhook: task %s event %s: %s", id, json_string_value(json_object_get(t, "event_id")), line);
    const char *dp[] = {id, W.claimer[idx], ok ? "ok" : "retry", status > 0 ? code : NULL, line, max, base, cap};
    run(BERTH_Q_WH_DONE, dp, NULL, NULL);
    json_decref(t);
    return 1;
}

typedef struct {
    int idx;
} worker_t;
static worker_t workers[MAX_WORKERS];

static void tick(void *data, int stopping)
{
    worker_t *w = data;
    if (stopping)
        return; /* what is queued stays queued: the next start (or another berthd) delivers it */
    const char *dp[] = {DISPATCH_BATCH};
    long n = 0;
    do { /* every thread may fan out: SKIP LOCKED gives each event to one of them */
        if (run(BERTH_Q_WH_DISPATCH, dp, NULL, &n) != 0)
            return;
    } while (n > 0 && !__atomic_load_n(&W.stopping, __ATOMIC_ACQUIRE));
    while (!__atomic_load_n(&W.stopping, __ATOMIC_ACQUIRE) && deliver_one(w->idx))
        ;
}

int berth_webhook_start(const berth_webhook_conf_t *conf)
{
    W.conf = *conf;
    if (W.conf.workers <= 0)
        W.conf.workers = 2;
    if (W.conf.workers > MAX_WORKERS)
        W.conf.workers = MAX_WORKERS;
    if (W.conf.timeout_s <= 0)
        W.conf.timeout_s = 10;
    if (W.conf.max_attempts <= 0)
        W.conf.max_attempts = 10;
    if (W.conf.backoff_s <= 0)
        W.conf.backoff_s = 1;
    if (W.conf.backoff_cap_s < W.conf.backoff_s)
        W.conf.backoff_cap_s = W.conf.backoff_s > 600 ? W.conf.backoff_s : 600;
    __atomic_store_n(&W.stopping, 0, __ATOMIC_RELEASE);
    snprintf(W.host, sizeof(W.host), "%s", conf->registry_host != NULL ? conf->registry_host : "");
    W.conf.registry_host = W.host;
    char hostname[64] = "";
    gethostname(hostname, sizeof(hostname) - 1);
    for (int i = 0; i < W.conf.workers; i++) {
        snprintf(W.claimer[i], sizeof(W.claimer[i]), "%s:%ld:%d", hostname, (long)getpid(), i);
        workers[i].idx = i;
        if (berth_bgloop_start(&W.loops[i], "berth-webhook", POLL_MS, tick, &workers[i]) != 0) {
            berth_webhook_stop();
            return BERTH_ERROR;
        }
        __atomic_store_n(&W.n, i + 1, __ATOMIC_RELEASE);
    }
    berth_webhook_wake();
    return 0;
}

void berth_webhook_stop(void)
{
    __atomic_store_n(&W.stopping, 1, __ATOMIC_RELEASE);
    int n = __atomic_exchange_n(&W.n, 0, __ATOMIC_ACQ_REL);
    for (int i = 0; i < n; i++) {
        berth_bgloop_stop(W.loops[i]);
        W.loops[i] = NULL;
    }
    __atomic_store_n(&W.stopping, 0, __ATOMIC_RELEASE);
}
