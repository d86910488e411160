/* Token scope parser: an accepted scope formats and re-parses to the same scope. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "auth/scope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_scope_t s, again;
    char buf[400];
    if (berth_scope_parse(&s, (const char *)data, size, NULL) == 0 && s.actions != 0) {
        int n = berth_scope_format(&s, buf, sizeof(buf));
        assert(n > 0);
        assert(berth_scope_parse(&again, buf, (size_t)n, NULL) == 0);
        assert(strcmp(again.name, s.name) == 0 && again.actions == s.actions);
    }
    return 0;
}
