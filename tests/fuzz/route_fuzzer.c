/* /v2 route and name grammar: whatever parses must satisfy the grammar it claims. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/digest.h"
#include "core/ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_route_t r;
    berth_err_t err;
    if (berth_route_parse(&r, (const char *)data, size, &err) == 0 && r.kind >= BERTH_ROUTE_MANIFEST) {
        assert(berth_ref_name_valid(r.name, strlen(r.name)));
        assert(strstr(r.name, "..") == NULL);
        if (r.ref_is_digest) {
            berth_digest_t d;
            assert(berth_digest_parse(&d, r.ref, strlen(r.ref), NULL) == 0);
        } else if (r.kind == BERTH_ROUTE_MANIFEST) {
            assert(berth_ref_tag_valid(r.ref, strlen(r.ref)));
        }
    }
    berth_ref_tag_valid((const char *)data, size);
    return 0;
}
