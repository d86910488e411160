/*
 * Memory given back after a burst. glibc keeps freed memory in its per-thread caches (tcache) and fast bins, and
 * a heap shrinks only when a free merges into its top: after a 10,000-client burst the edge's workers held 43 and
 * 51 MiB (10 before) and berthd 30 (22), all of it free, for as long as they ran. The edge's nginx runs with
 * both caches off, so every free merges and the heap's top goes back to the kernel as connections close; berthd,
 * whose threads gain from tcache, trims its arenas every few seconds instead.
 */
#ifndef BERTH_HTTP_MEMORY_H
#define BERTH_HTTP_MEMORY_H

/**
 * The environment for the edge's nginx: this process's, with GLIBC_TUNABLES set to turn both caches off (an
 * operator's own tunables follow and win). A NULL-terminated array built before fork (exec needs no allocation
 * in the child); it lives as long as the process.
 */
char *const *berth_memory_edge_env(void);

/** Start trimming this process's malloc arenas every `interval_ms`; 0, or BERTH_ERROR when no thread starts. */
int berth_memory_trim_start(long interval_ms);
/** Stop the trimming thread (nothing if it did not start). */
void berth_memory_trim_stop(void);

#endif
