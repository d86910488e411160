/* Token verification with a fixed key: arbitrary input never crashes, and nothing verifies without our key.
 * (A forged token passing here would be a finding: inputs are random bytes, never signed by the key.) */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/token.h"

static berth_token_keys_t *keys;

static void init(void)
{
    char dir[] = "/tmp/berth-fuzz-token-XXXXXX";
    if (mkdtemp(dir) == NULL || berth_token_keys_load(&keys, dir, NULL, NULL) != 0)
        abort();
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
