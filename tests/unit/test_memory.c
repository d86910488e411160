/*
 * registry/http/memory.c: the edge's environment turns glibc's malloc caches off (as the dynamic loader itself
 * reads it) while an operator's own tunables still win, and the trimming thread gives freed memory back.
 */
#include "registry/http/memory.h"

#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/tap.h"

static const char *interp;

/* the dynamic loader's path: PT_INTERP of this program */
static int find_interp(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP)
            interp = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return 1; /* the first object is the program */
}

/* `ld.so --list-tunables` run with env: its output */
static void list_tunables(char *const *env, char *out, size_t cap)
{
    int p[2];
    out[0] = '\0';
    if (interp == NULL || pipe(p) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execle(interp, interp, "--list-tunables", (char *)NULL, env);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(p[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
}

static const char *tunable(const char *all, const char *name)
{
    static char v[64];
    const char *at = strstr(all, name);
    if (at == NULL)
        return "(absent)";
    snprintf(v, sizeof(v), "%s", at + strlen(name) + 2); /* "name: value (min…" */
    v[strcspn(v, " \n")] = '\0';
    return v;
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    if (f != NULL)
        fclose(f);
    return kib;
}
#endif

int main(void)
{
    dl_iterate_phdr(find_interp, NULL);
    ok(interp != NULL && access(interp, X_OK) == 0, "the dynamic loader is %s", interp != NULL ? interp : "(none)");
    setenv("BERTH_MEMORY_TEST", "kept", 1);
    setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=3:glibc.malloc.mxfast=64", 1);
    char *const *env = berth_memory_edge_env();
    int tunables = 0, kept = 0;
    for (size_t i = 0; env[i] != NULL; i++) {
        tunables += strncmp(env[i], "GLIBC_TUNABLES=", 15) == 0;
        kept += strcmp(env[i], "BERTH_MEMORY_TEST=kept") == 0;
    }
    ok(tunables == 1 && kept == 1, "one GLIBC_TUNABLES, the rest of the environment kept (%d, %d)", tunables, kept);
    char out[16384];
    list_tunables(env, out, sizeof(out));
    ok(strcmp(tunable(out, "glibc.malloc.tcache_count"), "0x0") == 0, "the edge's tcache is off: %s",
       tunable(out, "glibc.malloc.tcache_count"));
    ok(strcmp(tunable(out, "glibc.malloc.mxfast"), "0x40") == 0, "the operator's mxfast wins over ours: %s",
       tunable(out, "glibc.malloc.mxfast"));
    ok(strcmp(tunable(out, "glibc.malloc.arena_max"), "0x3") == 0, "the operator's arena_max is kept: %s",
       tunable(out, "glibc.malloc.arena_max"));
    ok(berth_memory_edge_env() == env, "built once");

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("# the trimming check needs glibc's allocator: not under a sanitizer\n");
#else
    /* 48 MiB in 1 KiB blocks, all freed but the last, which pins the heap's top: only a trim gives it back */
    enum { N = 48 * 1024 };
    static char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(1000);
        memset(blocks[i], 1, 1000);
    }
    for (int i = 0; i < N - 1; i++)
        free(blocks[i]);
    long held = rss_kib();
    ok(berth_memory_trim_start(50) == 0, "the trimming thread starts");
    long now = held;
    for (int i = 0; i < 40 && held - now < 32 * 1024; i++) {
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        now = rss_kib();
    }
    ok(held - now >= 32 * 1024, "freed memory goes back to the kernel: RSS %ld → %ld KiB", held, now);
    berth_memory_trim_stop();
    free(blocks[N - 1]);
#endif
    return tap_done();
}
