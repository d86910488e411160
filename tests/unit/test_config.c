/* registry/config.c: defaults, the YAML file, environment overrides over it, and refusals of bad values. */
#include "registry/config.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int load_text(berth_config_t *cfg, const char *yaml, char *err, size_t errlen)
{
    char path[] = "/tmp/berth-test-config-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -2;
    FILE *f = fdopen(fd, "w");
    fputs(yaml, f);
    fclose(f);
    memset(cfg, 0, sizeof(*cfg));
    int rc = berth_config_load(cfg, path, err, errlen);
    unlink(path);
    return rc;
}

int main(void)
{
    berth_config_t cfg;
    char err[256] = "";

    unsetenv("BERTH_DATABASE_URL");
    memset(&cfg, 0, sizeof(cfg));
    ok(berth_config_load(&cfg, NULL, err, sizeof(err)) != 0 && strstr(err, "database.url") != NULL,
       "no database.url: refused, naming it (%s)", err);
    berth_config_dispose(&cfg);

    setenv("BERTH_DATABASE_URL", "postgresql:///berth", 1);
    setenv("BERTH_STORAGE_ROOT", "/tmp/berth-test-config-root", 1);
    memset(&cfg, 0, sizeof(cfg));
    ok(berth_config_load(&cfg, NULL, err, sizeof(err)) == 0, "no file: defaults load (%s)", err);
    ok(cfg.decision_ttl == 10, "auth.decision_ttl_seconds defaults to 10");
    ok(cfg.token_ttl == 300 && strcmp(cfg.token_issuer, "berth") == 0, "token defaults");
    /* 0: the gateway's block processor compresses in one thread per CPU (berth_sqfs_threads) */
    ok(cfg.gw_threads == 0 && cfg.gw_workers == 1, "gateway.threads defaults to 0 (one per CPU), workers to 1");
    ok(cfg.wh_workers == 2 && cfg.wh_timeout == 10 && cfg.wh_max_attempts == 10 && cfg.wh_backoff == 1 && cfg.wh_backoff_cap == 600,
       "webhook delivery defaults: 2 threads, 10 s timeout, 10 attempts, back-off 1 s capped at 600 s");
    berth_config_dispose(&cfg);

    ok(load_text(&cfg,
                 "webhook:\n  workers: 4\n  timeout_seconds: 3\n  max_attempts: 5\n  backoff_seconds: 2\n"
                 "  backoff_cap_seconds: 30\n",
                 err, sizeof(err)) == 0,
       "webhook.* keys load (%s)", err);
    ok(cfg.wh_workers == 4 && cfg.wh_timeout == 3 && cfg.wh_max_attempts == 5 && cfg.wh_backoff == 2 && cfg.wh_backoff_cap == 30,
       "the file sets every webhook delivery setting");
    berth_config_dispose(&cfg);
    setenv("BERTH_WEBHOOK_WORKERS", "1", 1);
    setenv("BERTH_WEBHOOK_MAX_ATTEMPTS", "3", 1);
    setenv("BERTH_WEBHOOK_TIMEOUT_SECONDS", "7", 1);
    setenv("BERTH_WEBHOOK_BACKOFF_SECONDS", "5", 1);
    setenv("BERTH_WEBHOOK_BACKOFF_CAP_SECONDS", "60", 1);
    ok(load_text(&cfg, "webhook:\n  workers: 4\n  max_attempts: 5\n", err, sizeof(err)) == 0 && cfg.wh_workers == 1 &&
           cfg.wh_max_attempts == 3 && cfg.wh_timeout == 7 && cfg.wh_backoff == 5 && cfg.wh_backoff_cap == 60,
       "BERTH_WEBHOOK_* override the file (%s)", err);
    berth_config_dispose(&cfg);
    unsetenv("BERTH_WEBHOOK_WORKERS");
    unsetenv("BERTH_WEBHOOK_MAX_ATTEMPTS");
    unsetenv("BERTH_WEBHOOK_TIMEOUT_SECONDS");
    unsetenv("BERTH_WEBHOOK_BACKOFF_SECONDS");
    unsetenv("BERTH_WEBHOOK_BACKOFF_CAP_SECONDS");
    static const char *const bad_hooks[] = {
        "webhook:\n  workers: 0\n",         "webhook:\n  workers: 17\n",
        "webhook:\n  timeout_seconds: 0\n", "webhook:\n  max_attempts: 0\n",
        "webhook:\n  backoff_seconds: 0\n", "webhook:\n  backoff_seconds: 60\n  backoff_cap_seconds: 30\n",
        "webhook:\n  max_attempts: many\n"};
    for (size_t i = 0; i < sizeof(bad_hooks) / sizeof(bad_hooks[0]); i++) {
        err[0] = 0;
        ok(load_text(&cfg, bad_hooks[i], err, sizeof(err)) != 0 && strstr(err, "webhook.") != NULL,
           "refused with a message naming the key: %s", err);
        berth_config_dispose(&cfg);
    }

    ok(load_text(&cfg, "gc:\n  batch: 500\n", err, sizeof(err)) == 0 && cfg.gc_interval == 20,
       "gc.interval_seconds defaults to 20 (%s)", err);
    berth_config_dispose(&cfg);
    setenv("BERTH_GC_INTERVAL_SECONDS", "3", 1);
    ok(load_text(&cfg, "gc:\n  interval_seconds: 2\n", err, sizeof(err)) == 0 && cfg.gc_interval == 3,
       "gc.interval_seconds loads, BERTH_GC_INTERVAL_SECONDS overrides it (%s)", err);
    berth_config_dispose(&cfg);
    unsetenv("BERTH_GC_INTERVAL_SECONDS");
    static const char *const bad_gc[] = {"gc:\n  interval_seconds: 0\n", "gc:\n  interval_seconds: soon\n"};
    for (size_t i = 0; i < sizeof(bad_gc) / sizeof(bad_gc[0]); i++) {
        err[0] = 0;
        ok(load_text(&cfg, bad_gc[i], err, sizeof(err)) != 0 && strstr(err, "gc.") != NULL, "refused naming the key: %s", err);
        berth_config_dispose(&cfg);
    }

    ok(load_text(&cfg, "gc:\n  batch: 500\n", err, sizeof(err)) == 0 && cfg.s3_edge_cache == 8LL << 30,
       "storage.s3.edge_cache_bytes defaults to 8 GiB (%s)", err);
    berth_config_dispose(&cfg);
    setenv("BERTH_S3_EDGE_CACHE", "0", 1);
    ok(load_text(&cfg, "storage:\n  s3:\n    edge_cache_bytes: 2G\n", err, sizeof(err)) == 0 && cfg.s3_edge_cache == 0,
       "BERTH_S3_EDGE_CACHE=0 turns it off over the file (%s)", err);
    berth_config_dispose(&cfg);
    unsetenv("BERTH_S3_EDGE_CACHE");
    ok(load_text(&cfg, "storage:\n  s3:\n    edge_cache_bytes: 2G\n", err, sizeof(err)) == 0 && cfg.s3_edge_cache == 2LL << 30,
       "storage.s3.edge_cache_bytes takes a size (%s)", err);
    berth_config_dispose(&cfg);
    err[0] = 0;
    ok(load_text(&cfg, "storage:\n  s3:\n    edge_cache_bytes: lots\n", err, sizeof(err)) != 0 &&
           strstr(err, "edge_cache_bytes") != NULL,
       "refused naming the key: %s", err);
    berth_config_dispose(&cfg);

    ok(load_text(&cfg, "auth:\n  decision_ttl_seconds: 1\n", err, sizeof(err)) == 0, "file loads (%s)", err);
    ok(cfg.decision_ttl == 1, "the file sets auth.decision_ttl_seconds");
    berth_config_dispose(&cfg);

    setenv("BERTH_AUTH_DECISION_TTL", "7", 1);
    ok(load_text(&cfg, "auth:\n  decision_ttl_seconds: 1\n", err, sizeof(err)) == 0, "file + env load (%s)", err);
    ok(cfg.decision_ttl == 7, "the environment overrides the file");
    berth_config_dispose(&cfg);
    unsetenv("BERTH_AUTH_DECISION_TTL");

    err[0] = 0;
    ok(load_text(&cfg, "auth:\n  decision_ttl_seconds: soon\n", err, sizeof(err)) != 0 && err[0] != 0,
       "a non-number is refused with a message (%s)", err);
    berth_config_dispose(&cfg);
    err[0] = 0;
    ok(load_text(&cfg, "auth: [unclosed\n", err, sizeof(err)) != 0 && err[0] != 0, "broken YAML is refused (%s)", err);
    berth_config_dispose(&cfg);
    return tap_done();
}
