/* LDAP filter escaping (user names from clients) and DN normalization (values from the directory). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "auth/ldap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[600], out[800], dn[700];
    size_t n = size < sizeof(in) - 1 ? size : sizeof(in) - 1;
    memcpy(in, data, n);
    in[n] = '\0';
    if (berth_ldap_escape(in, out, sizeof(out)) == 0) {
        assert(strlen(out) < sizeof(out));
        /* nothing that could end or open a filter component survives unescaped */
        for (const char *p = out; *p; p++) {
            assert(*p != '(' && *p != ')' && *p != '*');
            if (*p == '\\')
                assert(p[1] != '\0' && p[2] != '\0');
        }
    }
    berth_ldap_dn_normalize(in, dn, sizeof(dn));
    assert(strlen(dn) <= strlen(in));
    for (const char *p = dn; *p; p++)
        assert(!(*p >= 'A' && *p <= 'Z'));
    return 0;
}
