/*
 * Endpoint secrets at rest (replication/seal.c) on a real temporary directory: the key is generated once with mode
 * 0600 and read back on the next start, a sealed secret opens only under its key and only untampered, and a key
 * file that is there but unusable is refused and left alone.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replication/replication.h"
#include "replication/seal.h"
#include "tests/unit/tap.h"

static int opens_to(const char *sealed, const char *want)
{
    char *s = berth_repl_open(sealed);
    int r = s != NULL && want != NULL && strcmp(s, want) == 0;
    if (s == NULL && want == NULL)
        r = 1;
    free(s);
    return r;
}

/* another hex digit in place of *c */
static void flip(char *c)
{
    *c = *c == '0' ? '1' : '0';
}

int main(void)
{
    char dir[] = "/tmp/berth-seal-XXXXXX", path[256], other[256], shortkey[256];
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/replication.key", dir);
    snprintf(other, sizeof(other), "%s/other.key", dir);
    snprintf(shortkey, sizeof(shortkey), "%s/short.key", dir);

    struct stat st;
    ok(berth_repl_seal_load_key(path) == 0 && stat(path, &st) == 0 && st.st_size == 32 && (st.st_mode & 0777) == 0600,
       "a missing key is generated: 32 bytes, mode 0600");
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    ok(access(tmp, F_OK) != 0, "no temporary file is left behind");

    char *a = berth_repl_seal("s3cret-Passw0rd"), *b = berth_repl_seal("s3cret-Passw0rd");
    ok(a != NULL && strlen(a) == 2 * (12 + 15 + 16), "sealed: hex of nonce, ciphertext and tag");
    ok(a != NULL && b != NULL && strcmp(a, b) != 0, "a fresh nonce each time: the same secret seals differently");
    ok(a != NULL && strstr(a, "s3cret") == NULL, "the secret is not in the sealed text");
    ok(opens_to(a, "s3cret-Passw0rd") && opens_to(b, "s3cret-Passw0rd"), "both open to the secret");
    char *empty = berth_repl_seal("");
    ok(empty != NULL && opens_to(empty, ""), "an empty secret seals and opens");

    /* tampering: one hex digit of the ciphertext, of the tag, of the nonce changed (still valid hex) */
    size_t len = strlen(a);
    char *t = strdup(a);
    flip(&t[2 * 12]);
    ok(opens_to(t, NULL), "a changed ciphertext is refused");
    memcpy(t, a, len + 1);
    flip(&t[len - 1]);
    ok(opens_to(t, NULL), "a changed tag is refused");
    memcpy(t, a, len + 1);
    flip(&t[0]);
    ok(opens_to(t, NULL), "a changed nonce is refused");
    free(t);
    ok(opens_to(NULL, NULL) && opens_to("", NULL) && opens_to("abc", NULL), "missing and short input is refused");
    char odd[200];
    snprintf(odd, sizeof(odd), "%s0", a);
    ok(opens_to(odd, NULL), "an odd number of hex digits is refused");
    char nothex[200];
    snprintf(nothex, sizeof(nothex), "%s", a);
    nothex[30] = 'z';
    nothex[31] = 'z';
    ok(opens_to(nothex, NULL), "non-hex input is refused");

    /* the next start reads the same key: old secrets still open */
    ok(berth_repl_seal_load_key(path) == 0 && opens_to(a, "s3cret-Passw0rd"), "a restart reads the key back");
    ok(berth_repl_seal_load_key(other) == 0 && opens_to(a, NULL), "under another key the secret does not open");
    ok(berth_repl_seal_load_key(path) == 0 && opens_to(a, "s3cret-Passw0rd"), "and opens again under its own");

    /* a key file that exists but is unusable is an error, and is never replaced */
    int fd = open(shortkey, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ok(fd >= 0 && write(fd, "short", 5) == 5, "a 5-byte key file");
    close(fd);
    ok(berth_repl_seal_load_key(shortkey) != 0 && stat(shortkey, &st) == 0 && st.st_size == 5,
       "a short key is refused and left as it is");
    ok(berth_repl_seal_load_key(dir) != 0, "a directory is refused");
    char missing_dir[300];
    snprintf(missing_dir, sizeof(missing_dir), "%s/no/such/dir.key", dir);
    ok(berth_repl_seal_load_key(missing_dir) != 0, "a key that cannot be created is an error");

    free(a);
    free(b);
    free(empty);
    unlink(path);
    unlink(other);
    unlink(shortkey);
    rmdir(dir);
    return tap_done();
}
