/*
 * berth-sqfs: the gateway's converter on the command line, for tests, benchmarks and operators who want a squashfs
 * from layer files without a registry:  berth-sqfs [-c zstd|gzip|xz|lz4] [-j threads (default: CPUs)] [-D] OUT LAYER...
 * Layers oldest first (tar, tar+gzip, tar+zstd). Prints one JSON line of figures; exit 1 with the reason on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "registry/gateway/sqfs_convert.h"

/* Layer files, read with pread */
static int read_file(void *ctx, size_t layer, uint64_t off, void *buf, size_t len, size_t *got)
{
    const int *fds = ctx;
    *got = 0;
    while (*got < len) {
        ssize_t n = pread(fds[layer], (char *)buf + *got, len - *got, (off_t)(off + *got));
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    berth_sqfs_opts_t o = {.compressor = "zstd"};
    int opt;
    while ((opt = getopt(argc, argv, "c:j:b:D")) != -1) {
        switch (opt) {
        case 'c': o.compressor = optarg; break;
        case 'j': o.threads = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'b': o.block_size = strtoul(optarg, NULL, 10); break;
        case 'D': o.keep_devices = 1; break;
        default:
            fprintf(stderr,
                    "usage: berth-sqfs [-c zstd|gzip|xz|lz4] [-j threads (default: CPUs)] [-b block_size] [-D] OUT LAYER...\n");
            return 2;
        }
    }
    if (argc - optind < 1) {
        fprintf(stderr, "usage: berth-sqfs [-c zstd|gzip|xz|lz4] [-j threads (default: CPUs)] [-b block_size] [-D] OUT LAYER...\n");
        return 2;
    }
    const char *out = argv[optind];
    int fd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(out);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    berth_sqfs_stats_t st;
    berth_err_t err = {0};
    size_t n = (size_t)(argc - optind - 1);
    int *fds = calloc(n + 1, sizeof(int)), rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((fds[i] = open(argv[optind + 1 + i], O_RDONLY | O_CLOEXEC)) < 0) {
            snprintf(err.msg, sizeof(err.msg), "%s: %s", argv[optind + 1 + i], strerror(errno));
            rc = -1;
        }
    if (rc == 0)
        rc = berth_sqfs_convert(n, read_file, fds, fd, &o, &st, &err);
    for (size_t i = 0; i < n; i++)
        if (fds[i] > 0)
            close(fds[i]);
    free(fds);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == 0 && fsync(fd) != 0)
        rc = -1;
    close(fd);
    if (rc != 0) {
        unlink(out);
        fprintf(stderr, "berth-sqfs: %s\n", err.msg);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* VmHWM, not ru_maxrss: Linux carries ru_maxrss across execve, so it would report the parent's peak */
    long hwm = -1;
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    while (status != NULL && fgets(line, sizeof(line), status) != NULL)
        if (strncmp(line, "VmHWM:", 6) == 0)
            hwm = strtol(line + 6, NULL, 10);
    if (status != NULL)
        fclose(status);
    printf("{\"entries\": %llu, \"files\": %llu, \"dirs\": %llu, \"symlinks\": %llu, \"hardlinked_files\": %llu, "
           "\"content_bytes\": %llu, \"image_bytes\": %llu, \"tree_peak_bytes\": %zu, \"dir_table_bytes\": %zu, "
           "\"threads\": %u, \"seconds\": %.3f, \"cpu_seconds\": %.3f, \"max_rss_kib\": %ld}\n",
           (unsigned long long)st.entries, (unsigned long long)st.files, (unsigned long long)st.dirs,
           (unsigned long long)st.symlinks, (unsigned long long)st.hardlinks, (unsigned long long)st.content_bytes,
           (unsigned long long)st.image_bytes, st.tree_peak_bytes, st.dir_table_bytes, st.threads,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               (double)ru.ru_stime.tv_usec / 1e6,
           hwm);
    return 0;
}
