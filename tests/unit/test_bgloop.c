/* core/bgloop.c: a wake runs a tick, a wake during a tick is not lost, the interval ticks by itself, and stop
 * joins promptly even with a long interval or a long tick, after exactly one final tick with stopping = 1. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "core/bgloop.h"
#include "tap.h"

typedef struct {
    berth_bgloop_t *loop;
    atomic_int ticks, final_ticks, ticks_after_final;
    atomic_int hold; /* a tick waits while this is 1 (or until the loop is stopping) */
    atomic_int in_tick;
    atomic_int saw_stopping; /* berth_bgloop_stopping() seen as 1 inside a tick */
} probe_t;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Poll until *v >= want, for at most `ms`; returns whether it got there */
static int reaches(atomic_int *v, int want, int ms)
{
    for (double end = now_ms() + ms; now_ms() < end; sleep_ms(2))
        if (atomic_load(v) >= want)
            return 1;
    return atomic_load(v) >= want;
}

static void tick(void *data, int stopping)
{
    probe_t *p = data;
    if (atomic_load(&p->final_ticks) > 0)
        atomic_fetch_add(&p->ticks_after_final, 1);
    if (stopping) {
        atomic_fetch_add(&p->final_ticks, 1);
        return;
    }
    atomic_store(&p->in_tick, 1);
    while (atomic_load(&p->hold)) {
        if (p->loop != NULL && berth_bgloop_stopping(p->loop)) {
            atomic_store(&p->saw_stopping, 1);
            break;
        }
        sleep_ms(1);
    }
    atomic_fetch_add(&p->ticks, 1);
    atomic_store(&p->in_tick, 0);
}

static void test_wake_and_stop(void)
{
    probe_t p = {0};
    berth_bgloop_t *l;
    ok(berth_bgloop_start(&l, "test-wake", 0, tick, &p) == 0 && l != NULL, "start");
    p.loop = l;
    sleep_ms(50);
    ok(atomic_load(&p.ticks) == 0, "no interval: no tick before a wake");
    berth_bgloop_wake(l);
    ok(reaches(&p.ticks, 1, 2000), "a wake runs a tick");
    sleep_ms(30);
    ok(atomic_load(&p.ticks) == 1, "one wake, one tick");

    /* woken while a tick runs: the wake is remembered and runs one more tick afterwards */
    atomic_store(&p.hold, 1);
    berth_bgloop_wake(l);
    ok(reaches(&p.in_tick, 1, 2000), "second tick started");
    berth_bgloop_wake(l);
    atomic_store(&p.hold, 0);
    ok(reaches(&p.ticks, 3, 2000), "a wake during a tick is not lost (ticks %d)", atomic_load(&p.ticks));

    double t0 = now_ms();
    berth_bgloop_stop(l);
    double took = now_ms() - t0;
    ok(took < 500, "stop joins promptly (%.1f ms)", took);
    ok(atomic_load(&p.final_ticks) == 1, "exactly one final tick with stopping = 1");
    ok(atomic_load(&p.ticks_after_final) == 0, "nothing ticks after the final tick");
}

static void test_interval(void)
{
    probe_t p = {0};
    berth_bgloop_t *l;
    ok(berth_bgloop_start(&l, "test-interval", 20, tick, &p) == 0, "start with a 20 ms interval");
    ok(reaches(&p.ticks, 3, 3000), "ticks by itself, without wakes (%d)", atomic_load(&p.ticks));
    berth_bgloop_stop(l);
    ok(atomic_load(&p.final_ticks) == 1, "final tick");
}

static void test_stop_with_long_interval(void)
{
    probe_t p = {0};
    berth_bgloop_t *l;
    ok(berth_bgloop_start(&l, "test-long", 3600L * 1000, tick, &p) == 0, "start with a one-hour interval");
    sleep_ms(20);
    double t0 = now_ms();
    berth_bgloop_stop(l);
    double took = now_ms() - t0;
    ok(took < 500, "stop does not wait for the interval (%.1f ms)", took);
    ok(atomic_load(&p.ticks) == 0 && atomic_load(&p.final_ticks) == 1, "only the final tick ran");
}

static void test_stop_during_long_tick(void)
{
    probe_t p = {0};
    berth_bgloop_t *l;
    ok(berth_bgloop_start(&l, "a-name-longer-than-fifteen-bytes", 0, tick, &p) == 0, "start (a long name is cut, not refused)");
    p.loop = l;
    atomic_store(&p.hold, 1); /* the tick only ends when it sees the stop */
    berth_bgloop_wake(l);
    ok(reaches(&p.in_tick, 1, 2000), "long tick running");
    double t0 = now_ms();
    berth_bgloop_stop(l);
    double took = now_ms() - t0;
    ok(atomic_load(&p.saw_stopping) == 1, "a tick sees berth_bgloop_stopping()");
    ok(took < 500, "stop returns once the tick gives up (%.1f ms)", took);
    ok(atomic_load(&p.final_ticks) == 1, "and the final tick still runs");
}

int main(void)
{
    berth_bgloop_stop(NULL); /* a no-op, like free(NULL) */
    ok(1, "stop(NULL)");
    test_wake_and_stop();
    test_interval();
    test_stop_with_long_interval();
    test_stop_during_long_tick();
    return tap_done();
}
