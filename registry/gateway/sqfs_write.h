/* The squashfs side of the converter (sqfs_convert.h): file contents in, then the tree's inodes and tables out. */
#ifndef BERTH_GATEWAY_SQFS_WRITE_H
#define BERTH_GATEWAY_SQFS_WRITE_H

#include "registry/gateway/sqfs_convert.h"
#include "registry/gateway/sqfs_tree.h"

typedef struct st_berth_sqfs_writer_t berth_sqfs_writer_t;

/** Start a squashfs in `fd` (empty, owned by the caller): superblock placeholder, compressor, block processor. */
int berth_sqfs_writer_new(berth_sqfs_writer_t **out, int fd, const berth_sqfs_opts_t *opts, berth_err_t *err);
/** Stream one regular file's bytes: begin, append as often as needed, end. The inode's `sq` is set. */
int berth_sqfs_writer_begin_file(berth_sqfs_writer_t *w, berth_sqfs_inode_t *ino, berth_err_t *err);
int berth_sqfs_writer_append(berth_sqfs_writer_t *w, const void *data, size_t len, berth_err_t *err);
int berth_sqfs_writer_end_file(berth_sqfs_writer_t *w, berth_err_t *err);
/** After every file's bytes: inodes, directories and tables of `t`, then the superblock. Fills `stats`. */
int berth_sqfs_writer_finish(berth_sqfs_writer_t *w, berth_sqfs_tree_t *t, berth_sqfs_stats_t *stats, berth_err_t *err);
void berth_sqfs_writer_free(berth_sqfs_writer_t *w);

#endif
