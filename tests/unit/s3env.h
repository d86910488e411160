/* The test Ceph's credentials: deploy/berth-ceph writes them to $BERTH_TEST_CEPH_DIR/s3.env (fixture ceph). */
#ifndef BERTH_TESTS_S3ENV_H
#define BERTH_TESTS_S3ENV_H

#include <stdio.h>
#include <string.h>

enum { S3ENV_ENDPOINT, S3ENV_REGION, S3ENV_BUCKET, S3ENV_ACCESS, S3ENV_SECRET, S3ENV_N };

/* Fills v[S3ENV_*] from dir/s3.env; 0 when the endpoint and the secret were found, -1 otherwise. */
static inline int s3env_load(const char *dir, char v[S3ENV_N][256])
{
    static const char *keys[S3ENV_N] = {
        "BERTH_S3_ENDPOINT=", "BERTH_S3_REGION=", "BERTH_S3_BUCKET=", "BERTH_S3_ACCESS_KEY=", "BERTH_S3_SECRET_KEY="};
    char path[512], line[512];
    snprintf(path, sizeof(path), "%s/s3.env", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        for (int i = 0; i < S3ENV_N; i++)
            if (strncmp(line, keys[i], strlen(keys[i])) == 0)
                snprintf(v[i], 256, "%.255s", line + strlen(keys[i]));
    }
    fclose(f);
    return v[S3ENV_ENDPOINT][0] != '\0' && v[S3ENV_SECRET][0] != '\0' ? 0 : -1;
}

#endif
