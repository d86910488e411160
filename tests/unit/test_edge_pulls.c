/*
 * The edge's pull log as berthd reads it (registry/http/edge_pulls.c): a line nginx writes becomes one audited pull
 * (who, address, repository, reference, digest); anything else, hostile or truncated, is no pull; a file an earlier
 * run left is read at start and removed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/http/edge_pulls.h"
#include "tests/unit/tap.h"

/* what reached the audit log: this test stands in for auth/audit.c's queue, which needs a database */
static int pulls;
static char last[1024];

void berth_audit_pull(const char *username, const char *remote, const char *repo, const char *ref, const char *digest)
{
    pulls++;
    snprintf(last, sizeof(last), "%s|%s|%s|%s|%s", username, remote, repo, ref, digest);
}

static int parses(const char *line, berth_edge_pull_t *p)
{
    return berth_edge_pulls_parse(line, strlen(line), p) == 0;
}

int main(void)
{
    char hex[65];
    memset(hex, 'b', 64);
    hex[64] = '\0';
    char line[1024];
    berth_edge_pull_t p;
    snprintf(line, sizeof(line), "127.0.0.1 616c696365 %s /v2/team/app/manifests/v1", hex);
    ok(parses(line, &p) && strcmp(p.who, "alice") == 0 && strcmp(p.remote, "127.0.0.1") == 0 && strcmp(p.repo, "team/app") == 0 &&
           strcmp(p.ref, "v1") == 0 && strncmp(p.digest, "sha256:bbbb", 11) == 0,
       "a pull by tag: %s %s %s %s", p.who, p.remote, p.repo, p.ref);
    snprintf(line, sizeof(line), "::1 - %s /v2/a/manifests/b/manifests/sha256:%s", hex, hex);
    ok(parses(line, &p) && p.who[0] == '\0' && strcmp(p.remote, "::1") == 0 && strcmp(p.repo, "a/manifests/b") == 0 &&
           strncmp(p.ref, "sha256:", 7) == 0,
       "an anonymous pull by digest over IPv6, a repository with /manifests/ in its name: %s", p.repo);
    static const char *const bad[] = {
        "",
        "127.0.0.1",
        "127.0.0.1 616c696365 %s",
        "127.0.0.1 616c69636 %s /v2/team/app/manifests/v1",        /* odd hex */
        "127.0.0.1 616c6900 %s /v2/team/app/manifests/v1",         /* a NUL in the name */
        "127.0.0.1 zz %s /v2/team/app/manifests/v1",               /* no hex */
        "127.0.0.1 616c696365 %s /v2/team/app/manifests/",         /* no reference */
        "127.0.0.1 616c696365 %s /v2/manifests/v1",                /* no repository */
        "127.0.0.1 616c696365 %s /api/team/app/manifests/v1",      /* not /v2 */
        "127.0.0.1 616c696365 %s /v2/team/app/manifests/v1 extra", /* a field more */
        "127.0.0.1 616c696365 %s  /v2/team/app/manifests/v1",      /* an empty field */
        "127.0.0.1;rm 616c696365 %s /v2/team/app/manifests/v1",    /* an address that is none */
        "127.0.0.1 616c696365 %.63s /v2/team/app/manifests/v1",    /* a short digest */
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(line, sizeof(line), bad[i], hex);
        refused += !parses(line, &p);
    }
    ok(refused == (int)(sizeof(bad) / sizeof(bad[0])), "%d of %zu malformed lines are no pulls", refused,
       sizeof(bad) / sizeof(bad[0]));

    /* a file an earlier run left: read at start, each good line one pull, then removed */
    char dir[64], sub[96], path[128];
    snprintf(dir, sizeof(dir), "/tmp/berth-unit-pulls-%ld", (long)getpid());
    snprintf(sub, sizeof(sub), "%s/" BERTH_EDGE_PULLS_DIR, dir);
    mkdir(dir, 0700);
    mkdir(sub, 0755);
    snprintf(path, sizeof(path), "%s/" BERTH_EDGE_PULLS_LOG ".2", sub);
    FILE *f = fopen(path, "w");
    fprintf(f, "10.0.0.1 626f62 %s /v2/team/app/manifests/v1\n", hex);
    fprintf(f, "garbage\n");
    for (int i = 0; i < 3000; i++) /* a line longer than any nginx writes: skipped whole */
        fputc('x', f);
    fprintf(f, "\n10.0.0.2 626f62 %s /v2/team/app/manifests/v2\n", hex);
    fprintf(f, "10.0.0.3 626f62 %s /v2/team/app/manifests/v3", hex); /* cut off: no newline */
    fclose(f);
    ok(berth_edge_pulls_start(dir) == 0, "the reader starts");
    ok(pulls == 2 && strncmp(last, "bob|10.0.0.2|team/app|v2|sha256:", 32) == 0, "two whole pulls read at start (%d): %s", pulls,
       last);
    struct stat st;
    ok(access(path, F_OK) != 0 && stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700,
       "the file removed, its directory berthd's alone (%o)", (unsigned)(st.st_mode & 0777));
    snprintf(path, sizeof(path), "%s/" BERTH_EDGE_PULLS_LOG, sub); /* what the edge writes while the reader runs */
    f = fopen(path, "w");
    fprintf(f, "10.0.0.4 626f62 %s /v2/team/app/manifests/v4\n", hex);
    fclose(f);
    berth_edge_pulls_stop();
    ok(pulls == 3 && strncmp(last, "bob|10.0.0.4|", 13) == 0 && access(path, F_OK) != 0, "and at stop, what is left: %s", last);
    rmdir(sub);
    rmdir(dir);
    return tap_done();
}
