/* Unit tests for core: the grammar, digests, ranges, queries, manifests and error bodies. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/digest.h"
#include "core/err.h"
#include "core/glob.h"
#include "core/manifest.h"
#include "core/query.h"
#include "core/range.h"
#include "core/ref.h"
#include "core/resp.h"
#include "core/route.h"
#include "core/utf8.h"
#include "tests/unit/tap.h"

#define S(x) x, strlen(x)
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_names(void)
{
    const char *good[] = {"a", "library/ubuntu", "a/b/c/d", "a-b", "a--b", "a.b", "a_b", "a__b", "x9/y8", "0abc"};
    const char *bad[] = {"", "A", "a/", "/a", "a//b", "a..b", "a._b", "a___b", "-a", "a-", "a/../b", "a/./b", "a b", "a/B"};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        ok(berth_ref_name_valid(S(good[i])), "name %s is valid", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ok(!berth_ref_name_valid(S(bad[i])), "name '%s' is invalid", bad[i]);
    char longname[300];
    memset(longname, 'a', sizeof(longname));
    ok(berth_ref_name_valid(longname, 255) && !berth_ref_name_valid(longname, 256), "names are capped at 255 bytes");
    ok(berth_ref_tag_valid(S("v1.0_rc-2")) && berth_ref_tag_valid(S("_x")), "tags");
    ok(!berth_ref_tag_valid(S(".x")) && !berth_ref_tag_valid(S("-x")) && !berth_ref_tag_valid(S("a/b")) &&
           !berth_ref_tag_valid(S("")),
       "bad tags");
    ok(berth_ref_tag_valid(longname, 128) && !berth_ref_tag_valid(longname, 129), "tags are capped at 128");
    ok(berth_ref_project_len(S("proj/a/b")) == 4 && berth_ref_project_len(S("solo")) == 4, "project component");
}

static void test_image_refs(void)
{
    berth_image_ref_t im;
    ok(berth_ref_image_parse(&im, "proj/app") == 0 && im.host[0] == '\0' && strcmp(im.name, "proj/app") == 0 &&
           strcmp(im.ref, "latest") == 0 && !im.ref_is_digest,
       "no host, no tag: latest");
    ok(berth_ref_image_parse(&im, "127.0.0.1:5000/proj/app:v1") == 0 && strcmp(im.host, "127.0.0.1:5000") == 0 &&
           strcmp(im.name, "proj/app") == 0 && strcmp(im.ref, "v1") == 0,
       "host:port and tag");
    ok(berth_ref_image_parse(&im, "localhost/a@sha256:" HEX64) == 0 && strcmp(im.host, "localhost") == 0 && im.ref_is_digest &&
           strcmp(im.ref, "sha256:" HEX64) == 0,
       "localhost and digest");
    ok(berth_ref_image_parse(&im, "reg.example/a/b/c:x") == 0 && strcmp(im.name, "a/b/c") == 0,
       "a dotted first component is a host");
    ok(berth_ref_image_parse(&im, "myhost/app") == 0 && im.host[0] == '\0' && strcmp(im.name, "myhost/app") == 0,
       "a plain first component is part of the name");
    const char *bad[] = {"",     "Proj/app",  "proj/app:", "proj/app:.x", "proj/app@sha256:abc", "reg.example/",
                         "a//b", "proj/app@", NULL};
    for (size_t i = 0; bad[i] != NULL; i++)
        ok(berth_ref_image_parse(&im, bad[i]) != 0, "image '%s' is refused", bad[i]);
    ok(berth_ref_image_parse(&im, NULL) != 0, "NULL is refused");
}

static void test_routes(void)
{
    berth_route_t r;
    berth_err_t err;
    ok(berth_route_parse(&r, S("/v2/"), &err) == 0 && r.kind == BERTH_ROUTE_BASE, "/v2/");
    ok(berth_route_parse(&r, S("/v2"), &err) == 0 && r.kind == BERTH_ROUTE_BASE, "/v2");
    ok(berth_route_parse(&r, S("/v2/_catalog"), &err) == 0 && r.kind == BERTH_ROUTE_CATALOG, "catalog");
    ok(berth_route_parse(&r, S("/v2/a/b/manifests/latest"), &err) == 0 && r.kind == BERTH_ROUTE_MANIFEST &&
           strcmp(r.name, "a/b") == 0 && strcmp(r.ref, "latest") == 0 && !r.ref_is_digest,
       "manifest by tag");
    ok(berth_route_parse(&r, S("/v2/a/manifests/sha256:" HEX64), &err) == 0 && r.ref_is_digest, "manifest by digest");
    ok(berth_route_parse(&r, S("/v2/a/blobs/sha256:" HEX64), &err) == 0 && r.kind == BERTH_ROUTE_BLOB, "blob");
    ok(berth_route_parse(&r, S("/v2/a/blobs/uploads/"), &err) == 0 && r.kind == BERTH_ROUTE_UPLOAD && r.ref[0] == '\0',
       "new upload");
    ok(berth_route_parse(&r, S("/v2/a/b/blobs/uploads/0f-ab"), &err) == 0 && r.kind == BERTH_ROUTE_UPLOAD &&
           strcmp(r.ref, "0f-ab") == 0 && strcmp(r.name, "a/b") == 0,
       "upload session");
    ok(berth_route_parse(&r, S("/v2/a/tags/list"), &err) == 0 && r.kind == BERTH_ROUTE_TAGS, "tags");
    ok(berth_route_parse(&r, S("/v2/a/referrers/sha256:" HEX64), &err) == 0 && r.kind == BERTH_ROUTE_REFERRERS, "referrers");
    ok(berth_route_parse(&r, S("/v2/x/blobs/y/manifests/v1"), &err) == 0 && strcmp(r.name, "x/blobs/y") == 0,
       "names may contain route words");
    ok(berth_route_parse(&r, S("/v2/A/tags/list"), &err) == BERTH_EINVAL && err.oci == BERTH_OCI_NAME_INVALID, "uppercase");
    ok(berth_route_parse(&r, S("/v2/a/%2e%2e/tags/list"), &err) == BERTH_EINVAL && err.oci == BERTH_OCI_NAME_INVALID,
       "percent-encoding refused");
    ok(berth_route_parse(&r, S("/v2/a/../b/tags/list"), &err) == BERTH_EINVAL, "dot-dot refused");
    ok(berth_route_parse(&r, S("/v2/a/manifests/-bad"), &err) == BERTH_EINVAL && err.oci == BERTH_OCI_TAG_INVALID, "bad tag");
    ok(berth_route_parse(&r, S("/v2/a/blobs/latest"), &err) == BERTH_EDIGEST && err.oci == BERTH_OCI_DIGEST_INVALID,
       "blob needs a digest");
    ok(berth_route_parse(&r, S("/v2/a/blobs/md5:abc"), &err) == BERTH_EDIGEST, "unsupported algorithm");
    ok(berth_route_parse(&r, S("/v2/a/nothing"), &err) == BERTH_ENOTFOUND, "no route");
    ok(berth_route_parse(&r, S("/v3/a/tags/list"), &err) == BERTH_ENOTFOUND, "not /v2");
    ok(berth_route_parse(&r, S("/v2/a/blobs/uploads/bad!id"), &err) != 0 && err.oci == BERTH_OCI_BLOB_UPLOAD_UNKNOWN,
       "bad upload id");
}

static void test_digests(void)
{
    berth_digest_t d, e;
    berth_err_t err;
    ok(berth_digest_parse(&d, S("sha256:" HEX64), &err) == 0 && d.alg == BERTH_DIGEST_SHA256 &&
           strcmp(berth_digest_hex(&d), HEX64) == 0,
       "sha256 parses");
    ok(berth_digest_parse(&d, S("sha512:" HEX64 HEX64), &err) == 0 && d.alg == BERTH_DIGEST_SHA512, "sha512 parses");
    ok(berth_digest_parse(&d, S("sha256:" HEX64 "0"), &err) == BERTH_EDIGEST, "too long");
    ok(berth_digest_parse(&d, S("sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789"), &err) == BERTH_EDIGEST,
       "uppercase hex refused");
    ok(berth_digest_parse(&d, S("sha256" HEX64), &err) == BERTH_EDIGEST, "no colon");
    ok(berth_digest_parse(&d, S("sha1:0123456789abcdef0123456789abcdef01234567"), &err) == BERTH_EDIGEST, "sha1 refused");
    berth_digest_of(&d, BERTH_DIGEST_SHA256, "abc", 3);
    ok(strcmp(d.str, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc)");
    berth_hash_t *h = berth_hash_new(BERTH_DIGEST_SHA256);
    berth_hash_update(h, "a", 1);
    berth_hash_update(h, "bc", 2);
    berth_hash_peek(h, &e);
    berth_hash_free(h);
    ok(berth_digest_equal(&d, &e), "streaming equals one-shot");
    berth_digest_t copy = d; /* the struct is copied by value in the upload path */
    ok(strcmp(berth_digest_hex(&copy), berth_digest_hex(&d)) == 0, "copies keep their hex");
    berth_digest_of(&e, BERTH_DIGEST_SHA256, "abd", 3);
    ok(!berth_digest_equal(&d, &e), "different content, different digest");

    /* a saved sha256 state resumes in another hash (another berthd): every split of 200 bytes, across blocks */
    char data[200], saved[BERTH_HASH_SAVED_MAX];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7 + 3);
    berth_digest_of(&d, BERTH_DIGEST_SHA256, data, sizeof(data));
    int all = 1;
    for (size_t cut = 0; cut <= sizeof(data); cut++) {
        h = berth_hash_new(BERTH_DIGEST_SHA256);
        berth_hash_update(h, data, cut);
        all &= berth_hash_save(h, saved, sizeof(saved)) == 0 && strlen(saved) == BERTH_HASH_SAVED_MAX - 1;
        berth_hash_free(h);
        h = berth_hash_load(saved);
        all &= h != NULL;
        if (h == NULL)
            break;
        berth_hash_update(h, data + cut, sizeof(data) - cut);
        berth_hash_peek(h, &e);
        berth_hash_free(h);
        all &= berth_digest_equal(&d, &e);
    }
    ok(all, "a saved sha256 state resumes to the same digest at every offset");
    saved[83] = '3'; /* buffered-byte count 0x3f: disagrees with the bit count of 200 bytes */
    saved[84] = 'f';
    ok(berth_hash_load("s1:00") == NULL && berth_hash_load("") == NULL && berth_hash_load(NULL) == NULL, "damaged states refused");
    h = berth_hash_new(BERTH_DIGEST_SHA512);
    ok(berth_hash_save(h, saved, sizeof(saved)) == -1, "sha512 states are not saved");
    berth_hash_free(h);
}

static void test_ranges(void)
{
    uint64_t a, b;
    ok(berth_range_parse(S("0-99"), &a, &b) == 0 && a == 0 && b == 99, "plain range");
    ok(berth_range_parse(S("bytes 100-199/1000"), &a, &b) == 0 && a == 100 && b == 199, "bytes with total");
    ok(berth_range_parse(S("bytes=5-9/*"), &a, &b) == 0 && a == 5 && b == 9, "bytes= with star");
    ok(berth_range_parse(S("9-5"), &a, &b) != 0, "reversed");
    ok(berth_range_parse(S("-5"), &a, &b) != 0 && berth_range_parse(S("5-"), &a, &b) != 0, "open ranges refused");
    ok(berth_range_parse(S("0-99/50"), &a, &b) != 0, "total smaller than range");
    ok(berth_range_parse(S("0-99999999999999999999999"), &a, &b) != 0, "overflow refused");
    ok(berth_range_parse(S("0-1x"), &a, &b) != 0, "trailing garbage");
}

static void test_query(void)
{
    char v[64];
    const char *q = "digest=sha256%3Aab&n=10&last=a%2Fb&flag&x=1+2";
    ok(berth_query_get(S(q), "digest", v, sizeof(v)) == 9 && strcmp(v, "sha256:ab") == 0, "decoded value");
    ok(berth_query_get(S(q), "last", v, sizeof(v)) >= 0 && strcmp(v, "a/b") == 0, "slash decoded");
    ok(berth_query_get(S(q), "flag", v, sizeof(v)) == 0, "valueless key");
    ok(berth_query_get(S(q), "x", v, sizeof(v)) >= 0 && strcmp(v, "1 2") == 0, "plus is space");
    ok(berth_query_get(S(q), "missing", v, sizeof(v)) == -1, "absent");
    ok(berth_query_get(S("a=%zz"), "a", v, sizeof(v)) == -2, "bad escape");
    ok(berth_query_get(S("a=%00"), "a", v, sizeof(v)) == -2, "NUL refused");
    ok(berth_query_get(S("a=0123456789"), "a", v, 5) == -2, "too long");
    ok(berth_query_term("name=~page,public=true", "name", v, sizeof(v)) == 2 && strcmp(v, "page") == 0, "q= substring term");
    ok(berth_query_term("name=~page,public=true", "public", v, sizeof(v)) == 1 && strcmp(v, "true") == 0, "q= exact term");
    ok(berth_query_term("names=x", "name", v, sizeof(v)) == 0 && berth_query_term("", "name", v, sizeof(v)) == 0,
       "q= term names match whole");
    ok(berth_query_cookie("a=1; sid=xyz; b=2", "sid", v, sizeof(v)) == 0 && strcmp(v, "xyz") == 0, "cookie found");
    ok(berth_query_cookie("xsid=1; sidx=2", "sid", v, sizeof(v)) == -1, "cookie names match whole");
    ok(berth_query_decode(S("nested%2Ftool"), 0, v, sizeof(v)) == 11 && strcmp(v, "nested/tool") == 0 &&
           berth_query_decode(S("a+b"), 0, v, sizeof(v)) == 3 && strcmp(v, "a+b") == 0,
       "path segments decode, '+' stays");
}

static void test_utf8(void)
{
    const char *good[] = {"",
                          "plain",
                          "\xc3\xa9",
                          "\xe2\x82\xac",
                          "\xf0\x9f\x98\x80",
                          "\xef\xbf\xbf",
                          "\xf4\x8f\xbf\xbf",
                          "\xed\x9f\xbf",
                          "\xee\x80\x80"};
    const char *bad[] = {"\xff",
                         "\x80",
                         "\xc3",
                         "a\xc3",
                         "\xe2\x82",
                         "\xf0\x9f\x98",
                         "\xc0\xaf",
                         "\xc1\xbf",
                         "\xe0\x80\xaf",
                         "\xe0\x9f\xbf",
                         "\xed\xa0\x80",
                         "\xed\xbf\xbf",
                         "\xf0\x8f\xbf\xbf",
                         "\xf4\x90\x80\x80",
                         "\xf5\x80\x80\x80",
                         "\xf8\x88\x80\x80\x80",
                         "\xc3\x28",
                         "\xe2\x28\xa1"};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        ok(berth_utf8_valid(S(good[i])), "well-formed #%zu", i);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ok(!berth_utf8_valid(S(bad[i])), "ill-formed #%zu (cut, overlong, surrogate, > U+10FFFF or not UTF-8)", i);
    char out[16];
    ok(berth_utf8_scrub("a\xff"
                        "b",
                        out, sizeof(out)) == 5 &&
           strcmp(out, "a\xef\xbf\xbd"
                       "b") == 0,
       "scrub replaces with U+FFFD");
    ok(berth_utf8_scrub("\xc3\xa9\xc3\xa9", out, 4) == 2 && strcmp(out, "\xc3\xa9") == 0, "scrub never cuts a character");
    ok(berth_utf8_scrub("\xe2\x82", out, sizeof(out)) == 6 && berth_utf8_valid(out, strlen(out)), "cut sequence scrubbed");

    char v[64];
    ok(berth_query_get(S("last=%ff"), "last", v, sizeof(v)) == -2 && v[0] == '\0', "invalid UTF-8 refused, nothing left behind");
    ok(berth_query_get(S("q=%e2%82"), "q", v, sizeof(v)) == -2, "cut sequence refused");
    ok(berth_query_get(S("q=%e2%82%ac"), "q", v, sizeof(v)) == 3, "whole sequence accepted");
    ok(berth_query_decode(S("\xc3\xa9"), 0, v, sizeof(v)) == 2, "raw UTF-8 in a path segment");
    ok(berth_query_decode(S("\xc3"), 0, v, sizeof(v)) == -2, "raw cut sequence in a path segment");
    ok(berth_query_check(S("a=1&b=%c3%a9&flag"), 10) == 0, "whole query valid");
    ok(berth_query_check(S("a=1&b=%ff"), 10) == -2 && berth_query_check(S("%ff=1"), 10) == -2 &&
           berth_query_check(S("a=%zz"), 10) == -2 && berth_query_check(S("a=%00"), 10) == -2,
       "any bad value or key fails the whole query");
    ok(berth_query_check(S("a=0123456789"), 10) == 0 && berth_query_check(S("a=01234567890"), 10) == -3 &&
           berth_query_check(S("a=%41%41%41%41%41%41%41%41%41%41"), 10) == 0,
       "value length counted decoded");
}

static const char *manifest_with(const char *extra)
{
    static char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"schemaVersion\":2,\"mediaType\":\"" BERTH_MT_OCI_MANIFEST "\",\"config\":{\"mediaType\":\"application/"
             "vnd.oci.image.config.v1+json\",\"digest\":\"sha256:" HEX64 "\",\"size\":7},\"layers\":[{\"mediaType\":\"l\","
             "\"digest\":\"sha256:" HEX64 "\",\"size\":7},{\"mediaType\":\"l\",\"digest\":\"sha256:"
             "1111111111111111111111111111111111111111111111111111111111111111\",\"size\":3,\"urls\":[\"http://x\"]}]%s}",
             extra);
    return buf;
}

static void test_manifests(void)
{
    berth_manifest_info_t info;
    berth_err_t err;
    const char *m = manifest_with("");
    ok(berth_manifest_parse(&info, S(m), BERTH_MT_OCI_MANIFEST, &err) == 0, "valid manifest");
    ok(info.nrefs == 1 && info.refs[0].kind == BERTH_REF_BLOB, "config and layer deduplicated, foreign layer skipped");
    ok(info.artifact_type != NULL && strcmp(info.artifact_type, "application/vnd.oci.image.config.v1+json") == 0,
       "artifact type falls back to config media type");
    berth_manifest_info_dispose(&info);

    m = manifest_with(",\"subject\":{\"mediaType\":\"x\",\"digest\":\"sha256:" HEX64 "\",\"size\":1},\"artifactType\":\"a/b\","
                      "\"annotations\":{\"k\":\"v\"}");
    ok(berth_manifest_parse(&info, S(m), NULL, &err) == 0 && info.subject != NULL && strcmp(info.artifact_type, "a/b") == 0 &&
           strcmp(info.annotations, "{\"k\":\"v\"}") == 0,
       "subject, artifactType, annotations");
    berth_manifest_info_dispose(&info);

    ok(berth_manifest_parse(&info, S(m), BERTH_MT_OCI_INDEX, &err) == BERTH_EINVAL && err.oci == BERTH_OCI_MANIFEST_INVALID,
       "Content-Type disagreeing with mediaType");
    ok(berth_manifest_parse(&info, S(manifest_with(",\"annotations\":{\"k\":1}")), NULL, &err) == BERTH_EINVAL,
       "non-string annotation");
    ok(berth_manifest_parse(&info, S("{\"schemaVersion\":2,\"schemaVersion\":2}"), NULL, &err) == BERTH_EINVAL,
       "duplicate keys refused");
    ok(berth_manifest_parse(&info, S("{\"schemaVersion\":1}"), NULL, &err) == BERTH_EINVAL, "schema 1 refused");
    ok(berth_manifest_parse(&info, S("nope"), NULL, &err) == BERTH_EINVAL, "not JSON");
    const char *idx = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" BERTH_MT_OCI_MANIFEST "\",\"digest\":\"sha256:" HEX64
                      "\",\"size\":10,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}}]}";
    ok(berth_manifest_parse(&info, S(idx), NULL, &err) == 0 && info.is_index && info.nrefs == 1 &&
           info.refs[0].kind == BERTH_REF_MANIFEST && strcmp(info.media_type, BERTH_MT_OCI_INDEX) == 0,
       "index inferred without mediaType");
    berth_manifest_info_dispose(&info);
    char *big = malloc(BERTH_MANIFEST_MAX + 2);
    memset(big, ' ', BERTH_MANIFEST_MAX + 1);
    ok(berth_manifest_parse(&info, big, BERTH_MANIFEST_MAX + 1, NULL, &err) == BERTH_ETOOBIG, "size cap");
    free(big);
    ok(berth_manifest_accepts(S("application/json, " BERTH_MT_OCI_INDEX ";q=0.5"), BERTH_MT_OCI_INDEX), "accept with params");
    ok(!berth_manifest_accepts(S(BERTH_MT_OCI_MANIFEST), BERTH_MT_OCI_INDEX), "accept without the type");
    ok(berth_manifest_accepts(S("*/*"), BERTH_MT_OCI_INDEX) && berth_manifest_accepts(NULL, 0, BERTH_MT_OCI_INDEX),
       "wildcard and absent Accept");
}

static void test_errors(void)
{
    berth_err_t err;
    ok(berth_err_set(&err, BERTH_OCI_BLOB_UNKNOWN, "missing %d", 7) == BERTH_ENOTFOUND && berth_err_status(err.oci) == 404,
       "error table");
    size_t len;
    char *s = berth_err_json(&err, &len);
    json_t *j = json_loads(s, 0, NULL);
    json_t *e0 = json_array_get(json_object_get(j, "errors"), 0);
    ok(strcmp(json_string_value(json_object_get(e0, "code")), "BLOB_UNKNOWN") == 0 &&
           strcmp(json_string_value(json_object_get(e0, "message")), "missing 7") == 0,
       "OCI error JSON");
    json_decref(j);
    free(s);
    berth_err_set(&err, BERTH_OCI_INTERNAL, "secret detail /etc/x");
    s = berth_err_json(&err, &len);
    ok(strstr(s, "secret") == NULL, "5xx detail stays out of the body");
    free(s);
    /* a 503 used to carry libpq's text, server address and port included */
    berth_err_set(&err, BERTH_OCI_UNAVAILABLE, "database unreachable: connection to server at \"10.0.0.5\", port 5432 failed");
    s = berth_err_json(&err, &len);
    ok(strstr(s, "10.0.0.5") == NULL && strstr(s, "5432") == NULL && strstr(s, "service temporarily unavailable") != NULL,
       "503 body is the fixed text");
    free(s);
    berth_resp_t r;
    berth_resp_init(&r);
    berth_err_set(&err, BERTH_OCI_STORAGE_FULL, "write to /srv/berth/uploads/x: No space left on device");
    berth_resp_error(&r, &err);
    ok(r.status == 507 && strstr(r.body, "registry storage is full") != NULL && strstr(r.body, "/srv") == NULL &&
           berth_resp_get(&r, "retry-after") != NULL,
       "storage full: 507, fixed message, Retry-After");
    berth_resp_dispose(&r);
    berth_resp_init(&r);
    berth_err_set(&err, BERTH_OCI_UNAVAILABLE, NULL);
    berth_resp_error(&r, &err);
    ok(r.status == 503 && berth_resp_get(&r, "retry-after") != NULL, "503 carries Retry-After");
    berth_resp_dispose(&r);
    /* a message quoting client bytes, or cut by vsnprintf in the middle of a character, still makes valid JSON */
    char many[400] = "xy";
    for (int i = 0; i < 150; i++)
        memcpy(many + 2 + 2 * i, "\xc3\xa9", 3); /* two bytes of é, then the terminator the next one overwrites */
    const char *msgs[] = {"name \xff\xfe", "cut \xe2\x82", many};
    for (size_t i = 0; i < 3; i++) {
        berth_err_set(&err, BERTH_OCI_NAME_INVALID, "%s", msgs[i]);
        s = berth_err_json(&err, &len);
        j = s != NULL ? json_loads(s, 0, NULL) : NULL;
        ok(j != NULL && len == strlen(s), "error JSON valid for an ill-formed message #%zu", i);
        json_decref(j);
        free(s);
    }
}

/* Harbor's doublestar v1 semantics (immutable tag rules, retention, replication filters) plus nested braces. */
static void test_globs(void)
{
    ok(berth_glob_match("team/**", "team/a/b/c") == 1 && berth_glob_match("team/**", "team/a") == 1, "** crosses slashes");
    ok(berth_glob_match("team/**", "team") == 0, "a final ** takes one or more components, as doublestar v1");
    ok(berth_glob_match("**/app", "app") == 1 && berth_glob_match("**/app", "x/y/app") == 1 &&
           berth_glob_match("**/app", "x/yapp") == 0,
       "a leading ** takes zero or more components");
    ok(berth_glob_match("a/**/b", "a/b") == 1 && berth_glob_match("a/**/b", "a/x/y/b") == 1 &&
           berth_glob_match("a/**/b", "a/x/c") == 0,
       "a middle ** takes zero or more components");
    ok(berth_glob_match("**", "a/b") == 1 && berth_glob_match("**", "") == 1 && berth_glob_match("*", "a/b") == 0,
       "** alone matches everything, * one component");
    ok(berth_glob_match("team/*", "team/app") == 1 && berth_glob_match("team/*", "team/a/b") == 0, "* stays in a component");
    ok(berth_glob_match("a**b", "axyb") == 1 && berth_glob_match("a**b", "ax/yb") == 0, "** inside a component is *");
    ok(berth_glob_match("v1.?", "v1.2") == 1 && berth_glob_match("v1.?", "v1.10") == 0 && berth_glob_match("a?b", "a/b") == 0,
       "? is one character, never /");
    ok(berth_glob_match("\xc3\xa9?", "\xc3\xa9\xc3\xa8") == 1 && berth_glob_match("?", "\xc3\xa8") == 1,
       "? takes a whole UTF-8 character");
    ok(berth_glob_match("{team,ops}/app", "ops/app") == 1 && berth_glob_match("{team,ops}/app", "dev/app") == 0, "alternatives");
    ok(berth_glob_match("{release-*,v[0-9]*}", "v2.0") == 1 && berth_glob_match("{release-*,v[0-9]*}", "release-x") == 1 &&
           berth_glob_match("{release-*,v[0-9]*}", "latest") == 0,
       "alternatives with stars and classes");
    ok(berth_glob_match("a/{b,{c,d}/e}/**", "a/d/e/f") == 1 && berth_glob_match("a/{b,{c,d}/e}/**", "a/x/e/f") == 0,
       "nested alternatives holding /");
    ok(berth_glob_match("x{,-rc}", "x") == 1 && berth_glob_match("x{,-rc}", "x-rc") == 1, "an empty alternative");
    ok(berth_glob_match("[a-c]1", "b1") == 1 && berth_glob_match("[a-c]1", "d1") == 0 && berth_glob_match("[^a-c]1", "d1") == 1 &&
           berth_glob_match("[!a-c]1", "a1") == 0,
       "classes, ranges and negation");
    ok(berth_glob_match("\\*x", "*x") == 1 && berth_glob_match("\\*x", "ax") == 0 && berth_glob_match("a\\{b", "a{b") == 1,
       "backslash escapes");
    ok(berth_glob_match("team", "team2") == 0 && berth_glob_match("", "") == 1 && berth_glob_match("", "x") == 0,
       "whole-name matches");
    const char *bad[] = {"{a,b", "[abc", "[]", "a\\", "[-a]", "[a-]", "[a/b]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        const char *why = NULL;
        ok(berth_glob_check(bad[i], &why) == BERTH_EINVAL && why != NULL && berth_glob_match(bad[i], "a") == BERTH_EINVAL,
           "'%s' is refused (%s)", bad[i], why != NULL ? why : "-");
    }
    ok(berth_glob_check("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}", NULL) == 0 &&
           berth_glob_check("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}", NULL) == BERTH_EINVAL,
       "at most 256 alternatives");
    char longp[BERTH_GLOB_MAX_LEN + 2];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    ok(berth_glob_check(longp, NULL) == BERTH_EINVAL && berth_glob_check(longp + 1, NULL) == 0, "at most 1024 bytes");
    /* would take 2^40 steps with naive backtracking */
    char name[4096];
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    ok(berth_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", name) == 0, "stars do not backtrack exponentially");
    for (size_t i = 1; i < sizeof(name) - 1; i += 2)
        name[i] = '/';
    ok(berth_glob_match("**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/b", name) == 0, "neither do double stars");
}

/* the sizes quota messages print: exact below 1 KiB, one decimal and the largest unit from there on */
static void test_bytes(void)
{
    char b[BERTH_BYTES_HUMAN_MAX];
    ok(strcmp(berth_bytes_human(0, b), "0 B") == 0, "0 B");
    ok(strcmp(berth_bytes_human(1023, b), "1023 B") == 0, "1023 B");
    ok(strcmp(berth_bytes_human(1024, b), "1.0 KiB") == 0, "1.0 KiB");
    ok(strcmp(berth_bytes_human(2202009, b), "2.1 MiB") == 0, "2.1 MiB");
    ok(strcmp(berth_bytes_human(10485760, b), "10.0 MiB") == 0, "10.0 MiB");
    ok(strcmp(berth_bytes_human(1LL << 50, b), "1.0 PiB") == 0, "1.0 PiB");
    ok(strcmp(berth_bytes_human(INT64_MAX, b), "8.0 EiB") == 0, "INT64_MAX in EiB");
}

int main(void)
{
    test_names();
    test_image_refs();
    test_routes();
    test_digests();
    test_ranges();
    test_query();
    test_utf8();
    test_manifests();
    test_errors();
    test_globs();
    test_bytes();
    return tap_done();
}
