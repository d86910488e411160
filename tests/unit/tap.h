/* A tiny TAP harness: ok() per assertion, a non-zero exit when anything failed. */
#ifndef BERTH_TESTS_TAP_H
#define BERTH_TESTS_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                                                              \
    do {                                                                                                                           \
        int ok_ = (cond);                                                                                                          \
        tap_n++;                                                                                                                   \
        if (!ok_)                                                                                                                  \
            tap_failed++;                                                                                                          \
        printf("%s %d - ", ok_ ? "ok" : "not ok", tap_n);                                                                          \
        printf(__VA_ARGS__);                                                                                                       \
        printf("%s\n", ok_ ? "" : "  (" __FILE__ ")");                                                                             \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n# %d passed, %d failed\n", tap_n, tap_n - tap_failed, tap_failed);
    return tap_failed != 0;
}

#endif
