/*
 * The final root filesystem of an image, built from its layers' tar headers alone (no file contents): OCI layer
 * semantics — later layers replace paths, ".wh.<name>" deletes a path of the layers below, ".wh..wh..opq" empties
 * a directory of what the layers below put there, hard links share one inode (which survives its first name being
 * replaced or deleted), missing parent directories are implied (0755, root). Each regular file's inode remembers
 * which layer and which entry of that layer holds its final bytes, so the converter can stream them afterwards.
 *
 * Pure: no I/O, no libraries. Memory is the tree itself (berth_sqfs_tree_bytes), one node per path plus names,
 * link targets and xattrs; a layer may not make it larger than the limit given at creation.
 */
#ifndef BERTH_GATEWAY_SQFS_TREE_H
#define BERTH_GATEWAY_SQFS_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef enum {
    BERTH_SQFS_REG,
    BERTH_SQFS_DIR,
    BERTH_SQFS_SYMLINK,
    BERTH_SQFS_HARDLINK, /* entries only: becomes another name of the target's inode */
    BERTH_SQFS_CHR,
    BERTH_SQFS_BLK,
    BERTH_SQFS_FIFO,
    BERTH_SQFS_SOCK,
} berth_sqfs_type_t;

typedef struct st_berth_sqfs_xattr_t {
    char *key;
    void *value;
    size_t len;
} berth_sqfs_xattr_t;

/** One tar header as the tree needs it. Strings and arrays are borrowed for the call. */
typedef struct st_berth_sqfs_entry_t {
    const char *path;
    berth_sqfs_type_t type;
    uint32_t perm; /* 07777 */
    uint32_t uid, gid;
    int64_t mtime;
    uint64_t size;      /* regular files */
    const char *target; /* symlink target, or the hard link's target path */
    uint64_t rdev;
    const berth_sqfs_xattr_t *xattrs;
    size_t nxattrs;
} berth_sqfs_entry_t;

/** A file object; several nodes (names) share it when hard-linked. */
typedef struct st_berth_sqfs_inode_t {
    berth_sqfs_type_t type;
    uint32_t perm, uid, gid;
    int64_t mtime;
    uint64_t size, rdev;
    char *target;
    berth_sqfs_xattr_t *xattrs;
    size_t nxattrs;
    int layer;     /* regular files: the layer whose entry `ordinal` holds the bytes */
    long ordinal;  /* the entry's position in that layer, counting every header from 0 */
    unsigned refs; /* names pointing here (the hard-link count) */
    /* the writer's state */
    uint32_t ino;
    uint64_t ref;
    int written;
    void *sq; /* sqfs_inode_generic_t * of a file, owned by the writer */
} berth_sqfs_inode_t;

typedef struct st_berth_sqfs_node_t {
    char *name;
    struct st_berth_sqfs_node_t *parent, *child, *next, *prev, *hnext;
    berth_sqfs_inode_t *inode;
    int layer; /* the last layer that created or changed this name */
} berth_sqfs_node_t;

typedef struct st_berth_sqfs_tree_t berth_sqfs_tree_t;

/** An empty tree (only "/"), refusing to grow beyond `max_bytes` (0: no limit). */
berth_sqfs_tree_t *berth_sqfs_tree_new(size_t max_bytes);
void berth_sqfs_tree_free(berth_sqfs_tree_t *t);
/**
 * Apply one tar header of layer `layer` (layers oldest first, entries in tar order; `ordinal` counts the
 * layer's headers). `keep_devices` 0 drops character and block devices. BERTH_EINVAL with err->msg for a header
 * no extractor may follow (".." components, a hard link to nothing, a path through a non-directory);
 * BERTH_ETOOBIG past the memory limit.
 */
int berth_sqfs_tree_apply(berth_sqfs_tree_t *t, int layer, long ordinal, const berth_sqfs_entry_t *e, int keep_devices,
                          berth_err_t *err);
berth_sqfs_node_t *berth_sqfs_tree_root(berth_sqfs_tree_t *t);
/** The node at `path` ("a/b", leading "./" and "/" ignored), or NULL. */
berth_sqfs_node_t *berth_sqfs_tree_lookup(berth_sqfs_tree_t *t, const char *path);
/** Bytes the tree holds now and at most so far. */
size_t berth_sqfs_tree_bytes(const berth_sqfs_tree_t *t, size_t *peak);
/**
 * The regular-file inodes of the final tree, each once, ordered by (layer, ordinal): the order their bytes appear
 * in the layers. *out is malloc'd (caller frees the array, not the inodes).
 */
int berth_sqfs_tree_files(berth_sqfs_tree_t *t, berth_sqfs_inode_t ***out, size_t *n);
/** Children of a directory node sorted by name (byte order), as squashfs directories need. *out malloc'd. */
int berth_sqfs_tree_children(const berth_sqfs_node_t *dir, berth_sqfs_node_t ***out, size_t *n);

#endif
