/*
 * The upload state machine (registry/service/upload.c) driven directly, without HTTP: a real store on a temporary
 * directory and a fresh database in the test PostgreSQL cluster (fixture pg; exit 77 without it). Start a session,
 * chunks in Content-Range order, an out-of-order chunk refused with the session's Range, a wrong and a right
 * digest at PUT, a length that does not match what arrived, cancel, expiry by the janitor, and a monolithic POST.
 */
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/service.h"
#include "auth/token.h"
#include "core/digest.h"
#include "registry/service/janitor.h"
#include "registry/service/upload.h"
#include "sql/migrate.h"
#include "sql/registry.h"
#include "tap.h"

#define REPO "library/app"
#define ADMIN_PASSWORD "Upload-Machine-1"

static berth_registry_t reg;
static char authorization[128];

/* One request through the machine: begin, then (if it wants the body) write it in one piece and finish */
static int request(const char *method, const char *id, const char *query, const char *range, long long length, const char *body,
                   berth_resp_t *resp)
{
    berth_route_t route = {.kind = BERTH_ROUTE_UPLOAD};
    snprintf(route.name, sizeof(route.name), "%s", REPO);
    snprintf(route.ref, sizeof(route.ref), "%s", id);
    berth_upload_req_t rq = {.method = method,
                             .route = &route,
                             .query = query,
                             .query_len = query != NULL ? strlen(query) : 0,
                             .content_range = range,
                             .content_length = length,
                             .authorization = authorization,
                             .remote = "192.0.2.7"};
    berth_upload_t *u = berth_upload_begin(&reg, &rq, resp);
    if (u == NULL)
        return resp->status;
    if (body != NULL && body[0] != '\0')
        berth_upload_write(u, body, strlen(body));
    berth_upload_finish(u, resp);
    berth_upload_free(u);
    return resp->status;
}

static const char *header(const berth_resp_t *resp, const char *name)
{
    for (size_t i = 0; i < resp->nhdrs; i++)
        if (strcmp(resp->hdrs[i].name, name) == 0)
            return resp->hdrs[i].value;
    return "";
}

/* POST: a new session; its id into `id` */
static int start(char id[40])
{
    berth_resp_t resp;
    int st = request("POST", "", NULL, NULL, 0, NULL, &resp);
    snprintf(id, 40, "%s", header(&resp, "docker-upload-uuid"));
    berth_resp_dispose(&resp);
    return st == 202 && strlen(id) == 36;
}

/* status and Range of a request, disposed */
static int call(const char *method, const char *id, const char *query, const char *range, long long length, const char *body,
                char range_out[64], char code_out[64])
{
    berth_resp_t resp;
    int st = request(method, id, query, range, length, body, &resp);
    if (range_out != NULL)
        snprintf(range_out, 64, "%s", header(&resp, "range"));
    if (code_out != NULL) {
        const char *c = resp.body != NULL ? strstr(resp.body, "\"code\":\"") : NULL;
        snprintf(code_out, 64, "%.*s", c != NULL ? (int)strcspn(c + 8, "\"") : 0, c != NULL ? c + 8 : "");
    }
    berth_resp_dispose(&resp);
    return st;
}

static int upload_file_exists(const char *id)
{
    int64_t size;
    return berth_store_upload_size(reg.store, id, &size) == 0;
}

static int blob_file_exists(const char *digest_str)
{
    berth_digest_t d;
    int64_t size;
    if (berth_digest_parse(&d, digest_str, strlen(digest_str), NULL) != 0)
        return 0;
    return berth_store_blob_stat(reg.store, &d, &size, NULL) == 0;
}

static void count_upload(const char *id, double age, void *data)
{
    (void)id;
    (void)age;
    (*(int *)data)++;
}

static void sha256_of(const char *data, char out[BERTH_DIGEST_MAX + 1])
{
    berth_hash_t *h = berth_hash_new(BERTH_DIGEST_SHA256);
    berth_digest_t d;
    berth_hash_update(h, data, strlen(data));
    berth_hash_peek(h, &d);
    berth_hash_free(h);
    snprintf(out, BERTH_DIGEST_MAX + 1, "%s", d.str);
}

static void test_chunks_in_order(void)
{
    char id[40], range[64], code[64], q[BERTH_DIGEST_MAX + 16], digest[BERTH_DIGEST_MAX + 1];
    ok(start(id), "POST starts a session (%s)", id);
    ok(upload_file_exists(id), "its file exists in the store");
    ok(call("GET", id, NULL, NULL, 0, NULL, range, NULL) == 204 && strcmp(range, "0-0") == 0, "an empty session: 204, Range 0-0");
    ok(call("PATCH", id, NULL, "0-4", 5, "hello", range, NULL) == 202 && strcmp(range, "0-4") == 0,
       "first chunk 0-4: 202, Range 0-4");
    ok(call("PATCH", id, NULL, "10-14", 5, "xxxxx", range, code) == 416 && strcmp(range, "0-4") == 0,
       "a chunk that skips ahead: 416 with the session's Range (%s, %s)", range, code);
    ok(call("PATCH", id, NULL, "0-4", 5, "hello", range, NULL) == 416, "a chunk that repeats an offset: 416");
    ok(call("PATCH", id, NULL, "5-10", 5, " worl", NULL, code) == 416, "Content-Range and Content-Length that disagree: 416");
    ok(call("PATCH", id, NULL, "5-10", 6, " world", range, NULL) == 202 && strcmp(range, "0-10") == 0,
       "second chunk 5-10: Range 0-10");
    ok(call("GET", id, NULL, NULL, 0, NULL, range, NULL) == 204 && strcmp(range, "0-10") == 0, "status: Range 0-10");
    ok(call("PATCH", id, NULL, NULL, 10, "short", NULL, code) == 400 && strcmp(code, "SIZE_INVALID") == 0,
       "a body shorter than its Content-Length: 400 SIZE_INVALID");
    ok(call("GET", id, NULL, NULL, 0, NULL, range, NULL) == 204, "the session survives a short chunk (Range %s)", range);

    /* finish: the bytes so far are "hello world" plus what the short chunk appended; a wrong digest ends it */
    snprintf(q, sizeof(q), "digest=sha256:%064d", 0);
    ok(call("PUT", id, q, NULL, 0, NULL, NULL, code) == 400 && strcmp(code, "DIGEST_INVALID") == 0,
       "PUT with a digest the bytes do not have: 400 DIGEST_INVALID");
    ok(call("GET", id, NULL, NULL, 0, NULL, NULL, code) == 404 && strcmp(code, "BLOB_UPLOAD_UNKNOWN") == 0,
       "a wrong digest ends the session");
    ok(!upload_file_exists(id), "and removes its bytes");

    ok(start(id), "a new session");
    ok(call("PATCH", id, NULL, "0-4", 5, "hello", NULL, NULL) == 202, "chunk 0-4");
    sha256_of("hello world", digest);
    snprintf(q, sizeof(q), "digest=%s", digest);
    ok(call("PUT", id, q, "5-10", 6, " world", NULL, NULL) == 201, "PUT with the last chunk and the right digest: 201");
    ok(blob_file_exists(digest), "the blob is in the store under its digest");
    ok(!upload_file_exists(id), "the upload file is gone");
    ok(call("GET", id, NULL, NULL, 0, NULL, NULL, NULL) == 404, "the session is over");
    ok(call("PATCH", id, NULL, "11-12", 2, "!!", NULL, NULL) == 404, "a chunk after the end: 404");
    ok(berth_upload_hash_states() == 0, "no running hash is left behind (%ld)", berth_upload_hash_states());
}

static void test_cancel(void)
{
    char id[40];
    ok(start(id), "cancel: a new session");
    ok(call("PATCH", id, NULL, "0-2", 3, "abc", NULL, NULL) == 202, "a chunk");
    ok(berth_upload_hash_states() == 1, "its running hash is held");
    ok(call("DELETE", id, NULL, NULL, 0, NULL, NULL, NULL) == 204, "DELETE: 204");
    ok(!upload_file_exists(id) && berth_upload_hash_states() == 0, "bytes and running hash are gone");
    ok(call("PATCH", id, NULL, "3-5", 3, "def", NULL, NULL) == 404, "a chunk after cancel: 404");
    ok(call("DELETE", id, NULL, NULL, 0, NULL, NULL, NULL) == 404, "a second DELETE: 404");
}

static void test_expiry(void)
{
    char id[40], keep[40];
    ok(start(id) && start(keep), "expiry: two sessions");
    ok(call("PATCH", id, NULL, "0-2", 3, "abc", NULL, NULL) == 202, "a chunk");
    ok(berth_janitor_purge(&reg, 3600) == 0 && upload_file_exists(id), "a purge for sessions idle an hour leaves it");
    usleep(20 * 1000);
    ok(berth_janitor_purge(&reg, 0) >= 2, "a purge for sessions idle 0 s removes both");
    ok(!upload_file_exists(id) && !upload_file_exists(keep), "their files are gone");
    ok(berth_upload_hash_states() == 0, "and the running hash");
    ok(call("PATCH", id, NULL, "3-5", 3, "def", NULL, NULL) == 404, "an expired session answers 404");
}

static void test_monolithic(void)
{
    char q[BERTH_DIGEST_MAX + 16], digest[BERTH_DIGEST_MAX + 1], code[64];
    sha256_of("one piece", digest);
    snprintf(q, sizeof(q), "digest=%s", digest);
    ok(call("POST", "", q, NULL, 9, "one piece", NULL, NULL) == 201 && blob_file_exists(digest),
       "monolithic POST: 201, blob stored");
    sha256_of("other", digest);
    snprintf(q, sizeof(q), "digest=%s", digest);
    ok(call("POST", "", q, NULL, 9, "one piece", NULL, code) == 400 && strcmp(code, "DIGEST_INVALID") == 0,
       "monolithic POST with a wrong digest: 400");
    ok(!blob_file_exists(digest), "and nothing stored");
    int leftovers = 0;
    berth_store_upload_each(reg.store, count_upload, &leftovers);
    ok(leftovers == 0, "no upload file is left in the store (%d)", leftovers);
}

int main(void)
{
    const char *pg_dir = getenv("BERTH_TEST_PG_DIR"), *pg_port = getenv("BERTH_TEST_PG_PORT");
    if (pg_dir == NULL || pg_port == NULL) {
        printf("1..0 # SKIP BERTH_TEST_PG_DIR/BERTH_TEST_PG_PORT not set (run through CTest, fixture pg)\n");
        return 77;
    }
    char conninfo[512], dbname[64];
    snprintf(dbname, sizeof(dbname), "t_upload_machine_%d", (int)getpid());
    snprintf(conninfo, sizeof(conninfo), "host=%s port=%s user=postgres dbname=postgres", pg_dir, pg_port);
    PGconn *admin = PQconnectdb(conninfo);
    char sql[128];
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", dbname);
    PGresult *r = PQstatus(admin) == CONNECTION_OK ? PQexec(admin, sql) : NULL;
    int created = r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!created) {
        printf("1..0 # SKIP cannot create a database in the test cluster: %s\n", PQerrorMessage(admin));
        PQfinish(admin);
        return 77;
    }

    char root[] = "/tmp/berth-test-upload-XXXXXX", keys_dir[sizeof(root) + 8];
    berth_err_t err;
    berth_err_clear(&err);
    berth_db_t *db = NULL;
    berth_store_t *store = NULL;
    berth_token_keys_t *keys = NULL;
    snprintf(conninfo, sizeof(conninfo), "host=%s port=%s user=postgres dbname=%s", pg_dir, pg_port, dbname);
    ok(mkdtemp(root) != NULL, "temporary store directory");
    snprintf(keys_dir, sizeof(keys_dir), "%s/keys", root);
    ok(berth_db_open(&db, conninfo, 2, &err) == 0 && berth_db_migrate(db, &err) == 0, "database open and migrated %s", err.msg);
    ok(berth_store_open(&store, root, &err) == 0, "store open");
    ok(mkdir(keys_dir, 0700) == 0 && berth_token_keys_load(&keys, keys_dir, "ES256", &err) == 0, "token keys %s", err.msg);
    berth_authsvc_t auth = {.db = db,
                            .keys = keys,
                            .realm = "http://registry.test",
                            .issuer = "berth",
                            .service = "berth",
                            .ttl_seconds = 300,
                            .decision_ttl_seconds = 10};
    ok(berth_authsvc_bootstrap(&auth, ADMIN_PASSWORD, &err) == 0, "first admin %s", err.msg);
    reg = (berth_registry_t){.db = db, .auth = &auth, .store = store};
    berth_db_projects_auto_create(1);

    unsigned char b64[96];
    EVP_EncodeBlock(b64, (const unsigned char *)"admin:" ADMIN_PASSWORD, (int)strlen("admin:" ADMIN_PASSWORD));
    snprintf(authorization, sizeof(authorization), "Basic %s", b64);

    if (tap_failed == 0) {
        test_chunks_in_order();
        test_cancel();
        test_expiry();
        test_monolithic();
    }

    berth_token_keys_free(keys);
    berth_store_close(store);
    berth_db_close(db);
    snprintf(sql, sizeof(sql), "DROP DATABASE %s", dbname);
    PQclear(PQexec(admin, sql));
    PQfinish(admin);
    char rm[sizeof(root) + 16];
    snprintf(rm, sizeof(rm), "rm -rf %s", root);
    if (system(rm) != 0) // NOLINT(cert-env33-c): removes the test's own temporary directory
        ok(0, "remove %s", root);
    return tap_done();
}
