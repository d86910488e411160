/* Manifest/index validation: never crashes, and every recorded reference is a valid digest. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_manifest_info_t info;
    berth_err_t err;
    const char *ctypes[] = {NULL, BERTH_MT_OCI_MANIFEST, BERTH_MT_OCI_INDEX, BERTH_MT_DOCKER_MANIFEST};
    const char *ct = ctypes[size % 4];
    if (berth_manifest_parse(&info, (const char *)data, size, ct, &err) == 0) {
        assert(info.media_type != NULL);
        for (size_t i = 0; i < info.nrefs; i++) {
            berth_digest_t d;
            assert(berth_digest_parse(&d, info.refs[i].digest, strlen(info.refs[i].digest), NULL) == 0);
            assert(info.refs[i].size >= 0);
        }
        berth_manifest_info_dispose(&info);
    }
    berth_manifest_accepts((const char *)data, size, BERTH_MT_OCI_INDEX);
    return 0;
}
