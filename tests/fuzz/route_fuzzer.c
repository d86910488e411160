/* /v2 route and name grammar: whatever parses must satisfy the grammar it claims, and the row chosen for a
 * method must belong to the matched pattern and allow that method. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/digest.h"
#include "core/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *methods[] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OPTIONS", "TRACE"};
    berth_route_t r;
    berth_err_t err;
    int rc = berth_route_parse(&r, (const char *)data, size, &err);
    if (rc == 0 && r.kind >= BERTH_ROUTE_MANIFEST) {
        assert(berth_ref_name_valid(r.name, strlen(r.name)));
        assert(strstr(r.name, "..") == NULL);
        if (r.ref_is_digest) {
            berth_digest_t d;
            assert(berth_digest_parse(&d, r.ref, strlen(r.ref), NULL) == 0);
        } else if (r.kind == BERTH_ROUTE_MANIFEST) {
            assert(berth_ref_tag_valid(r.ref, strlen(r.ref)));
        }
    }
    if (rc == 0) {
        assert(r.pattern != NULL && r.kind != BERTH_ROUTE_NONE);
        const char *m = methods[size > 0 ? data[0] % (sizeof(methods) / sizeof(methods[0])) : 0];
        if (berth_route_select(&r, m, &err) == 0) {
            assert(r.id > BERTH_V2_NONE && r.id < BERTH_V2__COUNT);
            assert(strcmp(berth_routes[r.id].pattern, r.pattern) == 0 && berth_routes[r.id].kind == r.kind);
            assert((berth_routes[r.id].methods & berth_route_method(m)) != 0);
        } else {
            assert(r.id == BERTH_V2_NONE && err.oci == BERTH_OCI_METHOD);
        }
    }
    berth_ref_tag_valid((const char *)data, size);
    return 0;
}
