/* Authorization header parser: never overflows; what it accepts is NUL-free and bounded. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "auth/header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_auth_header_t h;
    if (berth_auth_header_parse(&h, (const char *)data, size) == 0 && h.kind == BERTH_AUTH_BASIC) {
        assert(strlen(h.user) > 0 && strchr(h.user, ':') == NULL);
        assert(strlen(h.user) <= BERTH_AUTH_USER_MAX && strlen(h.secret) <= BERTH_AUTH_SECRET_MAX);
    }
    berth_auth_header_dispose(&h);
    return 0;
}
