/*
 * The part of a kept blob decision's name that the Authorization header gives (registry/http/edge_blobs.c): the
 * edge's nginx map builds the same name, so what this rule refuses nginx must refuse too (tests/integration/
 * test_edge.py checks the two agree). What it must never produce: an empty segment ("//", which the kernel folds so
 * two headers would share a file), a "." or ".." segment, a segment longer than NAME_MAX, or a name from a header
 * whose scheme or shape it does not know.
 */
#include <stdio.h>
#include <string.h>

#include "registry/http/edge_blobs.h"
#include "tests/unit/tap.h"

static int is(const char *auth, const char *want)
{
    char out[3000];
    int rc = berth_edge_cred_path(auth, out, sizeof(out));
    return want == NULL ? rc == -1 : rc == 0 && strcmp(out, want) == 0;
}

/* prefix, n times c, suffix (buf holds 3000) */
static char *repeat(char *buf, char c, size_t n, const char *prefix, const char *suffix)
{
    size_t p = (size_t)snprintf(buf, 3000, "%s", prefix);
    memset(buf + p, c, n);
    snprintf(buf + p + n, 3000 - p - n, "%s", suffix);
    return buf;
}

int main(void)
{
    char a[3000], want[3000];
    ok(is(NULL, "-") && is("", "-"), "no credential: \"-\"");
    ok(is("Basic YWRtaW46cGFzcw==", "b/YWRtaW46cGFzcw=="), "a Basic value as it is");
    ok(is("Basic Pz8/Pz8+", "b/Pz8/Pz8+"), "a '/' inside a Basic value is a directory");
    static const char *const refused[] = {
        "Basic Pz8//Pz8",  "Basic /Pz8",  "Basic Pz8/",    "Basic ",         "Basic ../x",     "Basic a/./b",    "Basic a b",
        "basic YWRt",      "Basic  YWRt", "BASIC YWRt",    "Digest YWRt",    "YWRt",           "Basic YWRt\n",   "Basic YW%2e",
        "Bearer a..b",     "Bearer .a.b", "Bearer a.b.c.", "Bearer a.b",     "Bearer a.b.c.d", "Bearer a/b.c.d", "Bearer ../../b/x",
        "Bearer a.b.c/..", "Bearer ",     "bearer a.b.c",  "Bearer a.b.c d", "Bearer a.b.=",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        ok(is(refused[i], NULL), "refused: \"%s\"", refused[i]);
    ok(is(repeat(a, 'x', 255, "Basic ", ""), repeat(want, 'x', 255, "b/", "")), "a Basic segment of NAME_MAX characters");
    ok(is(repeat(a, 'x', 256, "Basic ", ""), NULL), "... one more is refused");
    repeat(a, 'x', 1000, "Basic ", "");
    for (size_t i = 6 + 200; i < strlen(a); i += 200)
        a[i] = '/';
    ok(berth_edge_cred_path(a, want, sizeof(want)) == 0, "a Basic value of 1,000 characters");
    size_t n = strlen(a);
    a[n] = 'x';
    a[n + 1] = '\0';
    ok(is(a, NULL), "... one more is refused");
    ok(is("Bearer a.b.c", "t/a.b.c"), "a short token is one piece");
    repeat(a, 'y', 448, "Bearer x.", ".z"); /* 452 characters: two pieces */
    snprintf(want, sizeof(want), "t/x.%.253s/%.197s", a + 9, a + 9 + 253);
    ok(is(a, want), "a token of 452 characters: pieces of 255 and 197");
    repeat(a, 'y', 2291, "Bearer x.", ".z");
    ok(berth_edge_cred_path(a, want, sizeof(want)) == 0 && strlen(want) == 2 + 2295 + 8, "a token of 2,295 characters: 9 pieces");
    repeat(a, 'y', 2292, "Bearer x.", ".z");
    ok(is(a, NULL), "... one more is refused (nginx has 9 captures)");
    ok(berth_edge_cred_path("Basic YWRtaW46cGFzcw==", want, 10) == -1, "a name that does not fit is refused");
    return tap_done();
}
