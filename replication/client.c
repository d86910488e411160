#include "replication/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct st_berth_client_t {
    CURL *curl;
    char url[512];
    char userpwd[600];
    char bearer[8192]; /* the last token, reused until a 401 */
    int insecure;
    char ca_file[512];
    long max_send, max_recv, timeout;
    size_t max_body;
};

/* ---- tokens per scope ------------------------------------------------------------------------------------- */

#define TOKENS 128
static struct {
    unsigned char key[SHA256_DIGEST_LENGTH]; /* of credential, registry, repository, access: no secret kept as a key */
    char bearer[8192];
    time_t expires;
} tokens[TOKENS];
static pthread_mutex_t tokens_mu = PTHREAD_MUTEX_INITIALIZER;

/* The repository a /v2 path names ("" for /v2/, the catalog, the token realm) */
static void path_repo(const char *path, char *out, size_t outsz)
{
    static const char *const marks[] = {"/manifests/", "/blobs/", "/tags/", "/referrers/"};
    out[0] = '\0';
    const char *v2 = strstr(path, "/v2/");
    if (v2 == NULL)
        return;
    v2 += 4;
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
        const char *m = strstr(v2, marks[i]);
        if (m != NULL) {
            snprintf(out, outsz, "%.*s", (int)(m - v2), v2);
            return;
        }
    }
}

static unsigned token_slot(const berth_client_t *c, const char *method, const char *path, unsigned char key[SHA256_DIGEST_LENGTH])
{
    char repo[512];
    path_repo(path, repo, sizeof(repo));
    if (repo[0] == '\0')
        return TOKENS;
    int write = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    char material[sizeof(c->userpwd) + sizeof(c->url) + sizeof(repo) + 8];
    int n = snprintf(material, sizeof(material), "%s%c%s%c%s%c%c", c->userpwd, 0, c->url, 0, repo, 0, write ? 'w' : 'r');
    EVP_Digest(material, (size_t)n, key, NULL, EVP_sha256(), NULL);
    OPENSSL_cleanse(material, sizeof(material));
    return ((unsigned)key[0] << 8 | key[1]) % TOKENS;
}

/* A live token for this request's scope into c->bearer: 1, or 0 when none is kept */
static int token_get(berth_client_t *c, const char *method, const char *path)
{
    unsigned char key[SHA256_DIGEST_LENGTH];
    unsigned i = token_slot(c, method, path, key);
    if (i >= TOKENS)
        return 0;
    pthread_mutex_lock(&tokens_mu);
    int hit = memcmp(tokens[i].key, key, sizeof(key)) == 0 && tokens[i].expires > time(NULL);
    if (hit)
        memcpy(c->bearer, tokens[i].bearer, sizeof(c->bearer));
    pthread_mutex_unlock(&tokens_mu);
    return hit;
}

static void token_put(const berth_client_t *c, const char *method, const char *path, long expires_in)
{
    unsigned char key[SHA256_DIGEST_LENGTH];
    unsigned i = token_slot(c, method, path, key);
    if (i >= TOKENS)
        return;
    pthread_mutex_lock(&tokens_mu);
    memcpy(tokens[i].key, key, sizeof(key));
    memcpy(tokens[i].bearer, c->bearer, sizeof(c->bearer));
    /* a margin for the request in flight; the distribution spec's default lifetime is 60 s */
    tokens[i].expires = time(NULL) + (expires_in > 10 ? expires_in - 5 : expires_in > 0 ? expires_in : 60);
    pthread_mutex_unlock(&tokens_mu);
}

void berth_http_dispose(berth_http_t *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

berth_client_t *berth_client_new(const berth_client_conf_t *conf)
{
    berth_client_t *c = calloc(1, sizeof(*c));
    c->curl = curl_easy_init();
    snprintf(c->url, sizeof(c->url), "%s", conf->url);
    size_t n = strlen(c->url);
    while (n > 0 && c->url[n - 1] == '/')
        c->url[--n] = '\0';
    if (conf->user != NULL && conf->user[0] != '\0')
        snprintf(c->userpwd, sizeof(c->userpwd), "%s:%s", conf->user, conf->password != NULL ? conf->password : "");
    c->insecure = conf->insecure;
    snprintf(c->ca_file, sizeof(c->ca_file), "%s", conf->ca_file != NULL ? conf->ca_file : "");
    c->max_send = conf->max_send_bytes_per_s;
    c->max_recv = conf->max_recv_bytes_per_s;
    c->timeout = conf->timeout_s > 0 ? conf->timeout_s : conf->timeout_s < 0 ? 0 : 120;
    c->max_body = conf->max_body > 0 ? conf->max_body : 64u << 20;
    return c;
}

void berth_client_free(berth_client_t *c)
{
    if (c == NULL)
        return;
    curl_easy_cleanup(c->curl);
    OPENSSL_cleanse(c->userpwd, sizeof(c->userpwd));
    OPENSSL_cleanse(c->bearer, sizeof(c->bearer));
    free(c);
}

typedef struct {
    berth_http_t *out;
    char challenge[1024];
    CURL *curl;
    berth_client_sink_fn sink; /* 2xx bodies go here when set */
    void *sink_ctx;
    int sink_failed;
    size_t max_body; /* 0: 64 MiB */
    size_t cap;      /* what out->body holds room for */
} ctx_t;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    ctx_t *x = ud;
    berth_http_t *h = x->out;
    size_t add = sz * n;
    if (x->sink != NULL) {
        long st = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
        if (st >= 200 && st < 300) {
            curl_off_t total = -1;
            curl_easy_getinfo(x->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &total);
            if (x->sink(x->sink_ctx, p, add, (int64_t)total) != 0) {
                x->sink_failed = 1;
                return 0;
            }
            return add;
        }
    }
    size_t max = x->max_body > 0 ? x->max_body : 64u << 20;
    if (h->len + add > max) {
        h->too_big = 1; /* bodies here are manifests, lists, tokens and error answers */
        return 0;
    }
    if (h->len + add + 1 > x->cap) { /* doubling, never past max + 1: a realloc per 16 KiB piece copied a body
                                      * of n bytes n/16384 times (4 MiB: seconds under ASan) */
        size_t cap = x->cap > 0 ? x->cap : 16384;
        while (cap < h->len + add + 1)
            cap *= 2;
        if (cap > max + 1)
            cap = max + 1;
        char *grown = realloc(h->body, cap);
        if (grown == NULL)
            return 0;
        h->body = grown;
        x->cap = cap;
    }
    memcpy(h->body + h->len, p, add);
    h->len += add;
    h->body[h->len] = '\0';
    return add;
}

static void header_value(const char *line, size_t len, size_t skip, char *out, size_t outsz)
{
    while (skip < len && line[skip] == ' ')
        skip++;
    snprintf(out, outsz, "%.*s", (int)(len - skip), line + skip);
    out[strcspn(out, "\r\n")] = '\0';
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    ctx_t *x = ud;
    size_t len = sz * n;
    if (len > 9 && strncasecmp(p, "location:", 9) == 0)
        header_value(p, len, 9, x->out->location, sizeof(x->out->location));
    else if (len > 13 && strncasecmp(p, "content-type:", 13) == 0)
        header_value(p, len, 13, x->out->content_type, sizeof(x->out->content_type));
    else if (len > 22 && strncasecmp(p, "docker-content-digest:", 22) == 0)
        header_value(p, len, 22, x->out->digest, sizeof(x->out->digest));
    else if (len > 6 && strncasecmp(p, "range:", 6) == 0)
        header_value(p, len, 6, x->out->range, sizeof(x->out->range));
    else if (len > 17 && strncasecmp(p, "www-authenticate:", 17) == 0)
        header_value(p, len, 17, x->challenge, sizeof(x->challenge));
    return len;
}

static int perform(berth_client_t *c, const char *method, const char *url, struct curl_slist *hdrs, const void *body, size_t len,
                   int use_basic, ctx_t *x)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    /* http and https only, redirects included: a URL, a token realm or a Location from a remote registry must
     * never make berthd speak file://, gopher://, dict:// … to anything (SSRF) */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* a link that goes silent (a cut WAN) fails the request in seconds, not at the overall timeout */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 5L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0 || strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (use_basic && c->userpwd[0]) {
        curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    }
    if (c->max_send > 0)
        curl_easy_setopt(h, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)c->max_send);
    if (c->max_recv > 0)
        curl_easy_setopt(h, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)c->max_recv);
    if (x->sink != NULL || strcmp(method, "HEAD") == 0) { /* a blob's HEAD may be redirected to storage too */
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    }
    x->curl = h;
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (c->ca_file[0]) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->out->status);
    curl_off_t cl = -1;
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    x->out->content_length = (long long)cl;
    curl_off_t up = 0;
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    x->out->sent += (long long)up;
    return rc == CURLE_OK ? 0 : -1;
}

static int param(const char *ch, const char *key, char *out, size_t outsz)
{
    char pat[32];
    snprintf(pat, sizeof(pat), "%s=\"", key);
    const char *p = strstr(ch, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    snprintf(out, outsz, "%.*s", (int)strcspn(p, "\""), p);
    return 0;
}

/* Answer a Bearer challenge: a token for exactly the scope asked, with our Basic credentials */
static int fetch_token(berth_client_t *c, const char *challenge, long *expires_in)
{
    char realm[512], service[256] = "", scope[1280] = "", url[4096]; /* a mount names two scopes */
    if (param(challenge, "realm", realm, sizeof(realm)) != 0)
        return -1;
    param(challenge, "service", service, sizeof(service));
    param(challenge, "scope", scope, sizeof(scope));
    char *es = curl_easy_escape(c->curl, service, 0), *sc = curl_easy_escape(c->curl, scope, 0);
    snprintf(url, sizeof(url), "%s?service=%s%s%s", realm, es, scope[0] ? "&scope=" : "", sc);
    curl_free(es);
    curl_free(sc);
    berth_http_t t = {0};
    ctx_t x = {.out = &t};
    int rc = perform(c, "GET", url, NULL, NULL, 0, 1, &x);
    json_t *j = rc == 0 && t.status == 200 ? json_loads(t.body, 0, NULL) : NULL;
    const char *tok = json_string_value(json_object_get(j, "token")) ?: json_string_value(json_object_get(j, "access_token"));
    if (tok != NULL)
        snprintf(c->bearer, sizeof(c->bearer), "Authorization: Bearer %s", tok);
    *expires_in = (long)json_integer_value(json_object_get(j, "expires_in"));
    json_decref(j);
    berth_http_dispose(&t);
    return tok != NULL ? 0 : -1;
}

static int client_do(berth_client_t *c, const char *method, const char *path, const char *const *headers, const void *body,
                     size_t len, berth_client_sink_fn sink, void *sink_ctx, berth_http_t *out)
{
    memset(out, 0, sizeof(*out));
    char url[4096];
    if (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0)
        snprintf(url, sizeof(url), "%s", path);
    else
        snprintf(url, sizeof(url), "%s%s", c->url, path);
    /* a registry token is for /v2 only; the REST API takes the Basic credentials */
    int api = strncmp(path, "/api/", 5) == 0;
    if (!api)
        token_get(c, method, url);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct curl_slist *hdrs = NULL;
        for (int i = 0; headers != NULL && headers[i] != NULL; i++)
            hdrs = curl_slist_append(hdrs, headers[i]);
        hdrs = curl_slist_append(hdrs, "Expect:");
        if (c->bearer[0] && !api)
            hdrs = curl_slist_append(hdrs, c->bearer);
        ctx_t x = {.out = out, .sink = sink, .sink_ctx = sink_ctx, .max_body = c->max_body};
        long long sent = out->sent;
        berth_http_dispose(out);
        out->sent = sent;
        int rc = perform(c, method, url, hdrs, body, len, api || c->bearer[0] == '\0', &x);
        curl_slist_free_all(hdrs);
        if (rc != 0 || x.sink_failed) { /* a cut transfer keeps no body (callers dispose only what succeeded) */
            free(out->body);
            out->body = NULL;
            out->len = 0;
            return -1;
        }
        if (api || out->status != 401 || attempt == 1 || strncasecmp(x.challenge, "Bearer ", 7) != 0)
            return 0;
        c->bearer[0] = '\0';
        long expires_in = 0;
        if (fetch_token(c, x.challenge, &expires_in) != 0)
            return 0; /* the 401 stands */
        token_put(c, method, url, expires_in);
    }
    return 0;
}

int berth_client_do(berth_client_t *c, const char *method, const char *path, const char *const *headers, const void *body,
                    size_t len, berth_http_t *out)
{
    return client_do(c, method, path, headers, body, len, NULL, NULL, out);
}

int berth_client_get_to(berth_client_t *c, const char *path, const char *const *headers, berth_client_sink_fn sink, void *ctx,
                        berth_http_t *out)
{
    return client_do(c, "GET", path, headers, NULL, 0, sink, ctx, out);
}
