/* Token verification with a fixed key: arbitrary input never crashes, and nothing verifies without our key.
 * (A forged token passing here would be a finding: inputs are random bytes, never signed by the key.) */
#include <assert.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/token.h"

static berth_token_keys_t *keys;

/* The keys live in memory once loaded: their directory goes at once (every run used to leave one in /tmp). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

static void init(void)
{
    char dir[] = "/tmp/berth-fuzz-token-XXXXXX";
    if (mkdtemp(dir) == NULL || berth_token_keys_load(&keys, dir, NULL, NULL) != 0)
        abort();
    remove_dir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (keys == NULL)
        init();
    char *tok = malloc(size + 1);
    memcpy(tok, data, size);
    tok[size] = '\0';
    berth_token_claims_t c;
    if (berth_token_verify(keys, tok, "berth", "berth-registry", time(NULL), &c, NULL) == 0) {
        /* only possible if the input embeds a valid signature by our fresh key: it cannot */
        assert(!"forged token accepted");
    }
    free(tok);
    return 0;
}
