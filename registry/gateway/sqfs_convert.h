/*
 * Flatten an image's layers into one squashfs, written directly with libsquashfs — no directory tree is unpacked
 * anywhere. Two passes over the layers (docs/design.md, "HPC squashfs gateway"):
 *
 *   1. headers only, oldest layer first: the final tree (sqfs_tree.h) — OCI whiteouts, opaque directories, hard
 *      links — knowing for each surviving regular file which layer entry holds its bytes;
 *   2. the layers again in order: the bytes of exactly those entries stream through libsquashfs's block processor
 *      (bounded backlog) into the output; a layer with nothing left to give is not read, and a layer's read
 *      stops after its last wanted entry. Then inodes, directories, fragment, id and xattr tables, superblock.
 *
 * Memory bound: the tree (one node per final path: ~100 bytes + name, link target and xattrs; capped by
 * opts.max_tree_bytes) + the directory table (kept in memory until the end, ~ (name + 8) bytes per entry) +
 * the block processor's backlog (opts.backlog blocks of opts.block_size, twice: data and compressed; 4 per
 * thread by default, so 2 x 4 x 128 KiB = 1 MiB per thread) + one libarchive read buffer and its decompressor's
 * window. Independent of file sizes and of the image's size.
 *
 * With threads > 1 the block processor compresses in its own worker threads while the calling thread inflates
 * the layers and feeds it, so gzip/zstd inflation overlaps compression; the output is byte-identical to one thread
 * (blocks are written in submission order).
 *
 * Blocking and CPU-heavy: call it from a worker thread, never from an event loop.
 */
#ifndef BERTH_GATEWAY_SQFS_CONVERT_H
#define BERTH_GATEWAY_SQFS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct st_berth_sqfs_opts_t {
    const char *compressor; /* "zstd" (default), "gzip", "xz", "lz4" */
    size_t block_size;      /* 0: 128 KiB */
    unsigned threads;       /* compressor threads; 0: one per online CPU (at most 32); 1: the calling thread only */
    size_t backlog;         /* blocks in flight; 0: 4 per thread */
    int keep_devices;       /* 0: character and block devices are dropped */
    size_t max_tree_bytes;  /* 0: 1 GiB */
    /* called now and then with the bytes of file content written so far and in total; nonzero stops the work */
    int (*progress)(uint64_t done, uint64_t total, void *data);
    void *progress_data;
} berth_sqfs_opts_t;

typedef struct st_berth_sqfs_stats_t {
    uint64_t entries, files, dirs, symlinks, hardlinks; /* of the final tree */
    uint64_t content_bytes;                             /* uncompressed file contents (hard links once) */
    uint64_t image_bytes;                               /* the squashfs's size */
    size_t tree_peak_bytes;                             /* the tree's memory at its largest */
    size_t dir_table_bytes;                             /* the directory table, held in memory */
    unsigned threads;                                   /* compressor threads used */
} berth_sqfs_stats_t;

/** 0 and the squashfs id ("zstd" → 6), or BERTH_EINVAL for a compressor libsquashfs does not have. */
int berth_sqfs_compressor_id(const char *name, int *id_out);
/** Compressor threads for opts.threads `asked`: itself (at most 32), or the online CPUs (at most 32) for 0. */
unsigned berth_sqfs_threads(unsigned asked);

/**
 * Where layer bytes come from (the store's driver in berthd, files in berth-sqfs): bytes [off, off + len) of layer
 * `layer` into `buf`, *got < len only at its end. 0, or nonzero when they cannot be read.
 */
typedef int (*berth_sqfs_read_fn)(void *ctx, size_t layer, uint64_t off, void *buf, size_t len, size_t *got);

/**
 * Convert `nlayers` layers (tar, tar+gzip, tar+zstd; detected from the bytes), oldest first, read through `read`,
 * into a squashfs written to `out_fd` from offset 0 (a fresh, empty file). On failure err->msg says why in one
 * line naming the layer (a corrupt or truncated layer, a hostile path, no space) and the file's content is
 * undefined: the caller discards it. BERTH_EINVAL for bad input, BERTH_EUNAVAIL when `progress` asked to stop,
 * BERTH_ERROR for I/O failures.
 */
int berth_sqfs_convert(size_t nlayers, berth_sqfs_read_fn read, void *read_ctx, int out_fd, const berth_sqfs_opts_t *opts,
                       berth_sqfs_stats_t *stats, berth_err_t *err);

#endif
