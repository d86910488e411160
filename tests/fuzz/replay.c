/* Standalone driver: feeds every file of the given corpus directories to the harness (libgit2's pattern), so
 * the corpora run in CTest with any compiler; with clang and -DBERTH_BUILD_FUZZERS=ON the same harness links
 * against libFuzzer instead. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            return fprintf(stderr, "replay: %s missing\n", argv[i]), 1;
        if (!S_ISDIR(st.st_mode)) {
            count += run_file(argv[i]) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
            count += run_file(p) == 0;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", count);
    return count == 0; /* an empty corpus is a broken test, not a pass */
}
