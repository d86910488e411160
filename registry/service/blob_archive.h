/* A blob read as a tar archive (gzip, zstd or plain) through the store, whichever driver holds it. */
#ifndef BERTH_SERVICE_BLOB_ARCHIVE_H
#define BERTH_SERVICE_BLOB_ARCHIVE_H

#include <archive.h>

#include "core/digest.h"
#include "registry/storage/store.h"

/** A libarchive reader over blob `d` (read in ranges of a few MiB); NULL when it is missing or unreadable. */
struct archive *berth_blob_archive_open(berth_store_t *store, const berth_digest_t *d);

#endif
