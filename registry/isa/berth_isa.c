/*
 * berth-isa: the node side of ISA variants. detect (this CPU as a level and features; Slurm and NFD spellings),
 * resolve (an image to the digest this node should run: Berth's resolve API, or any OCI registry with the same
 * matching in-process), containerd-hosts (a hosts.toml pointing containerd at Berth's ISA view).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/ref.h"
#include "registry/isa/detect.h"
#include "registry/isa/index.h"
#include "registry/isa/sqfs_fetch.h"
#include "registry/isa/vocab.h"
#include "replication/client.h"

#define EXIT_NO_VARIANT 3

static const char *opt(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

static int flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char tmp[4096];
    size_t r;
    while ((r = fread(tmp, 1, sizeof(tmp), f)) > 0)
        fwrite(tmp, 1, r, m);
    fclose(m);
    fclose(f);
    return buf;
}

/* The node: --cpuinfo FILE, --level L (with --arch), or this CPU */
static int node_of(int argc, char **argv, berth_isa_node_t *n)
{
    const char *cpuinfo = opt(argc, argv, "--cpuinfo"), *level = opt(argc, argv, "--level");
    if (cpuinfo != NULL) {
        char *text = slurp(cpuinfo);
        int rc = text != NULL ? berth_isa_node_from_cpuinfo(text, n) : -1;
        free(text);
        if (rc != 0)
            fprintf(stderr, "berth-isa: cannot read a CPU from %s\n", cpuinfo);
        return rc;
    }
    if (berth_isa_detect(n) != 0) {
        fprintf(stderr, "berth-isa: unsupported architecture\n");
        return -1;
    }
    if (level != NULL && strcmp(level, "auto") != 0) {
        berth_isa_arch_t arch = opt(argc, argv, "--arch") != NULL ? berth_isa_arch_parse(opt(argc, argv, "--arch")) : n->level.arch;
        memset(n, 0, sizeof(*n));
        snprintf(n->os, sizeof(n->os), "linux");
        if (berth_isa_level_parse(arch, level, &n->level) != 0) {
            fprintf(stderr, "berth-isa: unknown level %s\n", level);
            return -1;
        }
        berth_isa_level_features(&n->level, &n->features);
        n->level_source = "level";
    }
    return 0;
}

static int cmd_detect(int argc, char **argv)
{
    berth_isa_node_t n;
    if (node_of(argc, argv, &n) != 0)
        return 1;
    char level[24], feats[BERTH_ISA_MAX_FEATURES * BERTH_ISA_FEATURE_LEN];
    berth_isa_level_name(&n.level, level, sizeof(level));
    berth_isa_features_join(&n.features, feats, sizeof(feats));
    if (flag(argc, argv, "--slurm-features")) {
        /* slurm.conf Feature=: every level the node runs (so -C x86-64-v3 matches v4 nodes too), then extras */
        if (n.level.arch == BERTH_ISA_AMD64)
            for (int m = n.level.major; m >= 1; m--)
                printf(m == 1 ? "x86-64" : "x86-64-v%d,", m);
        else
            printf("%s", level);
        berth_isa_features_t implied;
        berth_isa_level_features(&n.level, &implied);
        for (int i = 0; i < n.features.n; i++)
            if (!berth_isa_features_has(&implied, n.features.names[i]))
                printf(",%s", n.features.names[i]);
        printf("\n");
    } else if (flag(argc, argv, "--nfd-labels")) {
        printf("kubernetes.io/arch=%s\n", berth_isa_arch_name(n.level.arch));
        for (int m = 1; n.level.arch == BERTH_ISA_AMD64 && m <= n.level.major; m++)
            printf("feature.node.kubernetes.io/cpu-cpuid.X86_64_V%d=true\n", m);
        for (int i = 0; i < n.features.n; i++) { /* in NFD's spelling, so the labels read back to the same node */
            const char *nfd = berth_isa_vocab_nfd(n.level.arch, n.features.names[i]);
            if (nfd != NULL)
                printf("feature.node.kubernetes.io/cpu-cpuid.%s=true\n", nfd);
        }
    } else if (flag(argc, argv, "--json")) {
        json_t *f = json_array();
        for (int i = 0; i < n.features.n; i++)
            json_array_append_new(f, json_string(n.features.names[i]));
        json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:s}", "os", n.os, "architecture", berth_isa_arch_name(n.level.arch), "level",
                              level, "features", f, "source", n.level_source);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("%s %s\n%s\n", berth_isa_arch_name(n.level.arch), level, feats);
    }
    return 0;
}

/* ---- resolve ---------------------------------------------------------------------------------------------- */

static int run_resolve(berth_client_t *client, const char *base, const berth_image_ref_t *imp, const berth_isa_node_t *nodep,
                       const char *maxl, const char *image_arg, char *digest_out);

static int cmd_resolve(int argc, char **argv)
{
    berth_image_ref_t im;
    if (argc < 3 || berth_ref_image_parse(&im, argv[argc - 1]) != 0 || im.host[0] == '\0') {
        fprintf(stderr, "usage: berth-isa resolve [--registry URL] [--user U --password-file F] [--level L] [--max-level L]\n"
                        "                         [--squashfs [--cache DIR] [--wait SECONDS]] HOST/NAME[:TAG]\n");
        return 2;
    }
    berth_isa_node_t node;
    if (node_of(argc, argv, &node) != 0)
        return 1;
    char base[512], password[512] = "";
    const char *reg = opt(argc, argv, "--registry"), *user = opt(argc, argv, "--user"), *pwf = opt(argc, argv, "--password-file");
    int insecure = flag(argc, argv, "--insecure");
    snprintf(base, sizeof(base), "%s", reg != NULL ? reg : "");
    if (base[0] == '\0')
        snprintf(base, sizeof(base), "https://%s", im.host);
    if (user != NULL && pwf != NULL) {
        char *pw = slurp(pwf);
        if (pw == NULL) {
            fprintf(stderr, "berth-isa: cannot read %s\n", pwf);
            return 1;
        }
        pw[strcspn(pw, "\r\n")] = '\0';
        snprintf(password, sizeof(password), "%s", pw);
        free(pw);
    }
    /* the same registry client replication uses: Basic, or the token dance for registries that want it */
    berth_client_conf_t cc = {
        .url = base, .user = pwf != NULL ? user : NULL, .password = password, .insecure = insecure, .timeout_s = 60};
    berth_client_t *client = berth_client_new(&cc);
    int squashfs = flag(argc, argv, "--squashfs");
    char digest[160] = "";
    int rc = run_resolve(client, base, &im, &node, opt(argc, argv, "--max-level"), argv[argc - 1], squashfs ? digest : NULL);
    if (rc == 0 && squashfs) /* this build's flattened root file system: the published file, or a verified download */
        rc = berth_isa_squashfs(client, im.name, digest, opt(argc, argv, "--cache"), opt(argc, argv, "--wait"));
    berth_client_free(client);
    return rc;
}

static int run_resolve(berth_client_t *client, const char *base, const berth_image_ref_t *imp, const berth_isa_node_t *nodep,
                       const char *maxl, const char *image_arg, char *digest_out)
{
    berth_image_ref_t im = *imp;
    berth_isa_node_t node = *nodep;
    char url[2048];
    char level[24], extras[2048];
    berth_isa_level_name(&node.level, level, sizeof(level));
    berth_isa_features_t implied, extra;
    berth_isa_level_features(&node.level, &implied);
    berth_isa_features_clear(&extra);
    for (int i = 0; i < node.features.n; i++)
        if (!berth_isa_features_has(&implied, node.features.names[i]))
            berth_isa_features_add(&extra, node.features.names[i]);
    berth_isa_features_join(&extra, extras, sizeof(extras));
    /* Berth first: its answer carries scan verdicts and project policy */
    const char *slash = strchr(im.name, '/');
    if (slash != NULL) {
        char rest[512];
        snprintf(rest, sizeof(rest), "%s", slash + 1);
        CURL *esc = curl_easy_init();
        char *r1 = curl_easy_escape(esc, rest, 0), *r2 = curl_easy_escape(esc, r1, 0), *fe = curl_easy_escape(esc, extras, 0);
        snprintf(url, sizeof(url),
                 "/api/v2.0/projects/%.*s/repositories/%s/artifacts/%s/isa/resolve?arch=%s&level=%s&features=%s%s%s",
                 (int)(slash - im.name), im.name, r2, im.ref, berth_isa_arch_name(node.level.arch), level, fe,
                 maxl != NULL ? "&max_level=" : "", maxl != NULL ? maxl : "");
        curl_free(r1);
        curl_free(r2);
        curl_free(fe);
        curl_easy_cleanup(esc);
        berth_http_t h;
        if (berth_client_do(client, "GET", url, (const char *const[]){"Accept: application/json", NULL}, NULL, 0, &h) == 0 &&
            (h.status == 200 || h.status == 409)) {
            json_t *j = json_loads(h.body, 0, NULL);
            berth_http_dispose(&h);
            if (json_object_get(j, "candidates") != NULL) {
                const char *d = json_string_value(json_object_get(json_object_get(j, "selected"), "digest"));
                if (d != NULL && digest_out != NULL)
                    snprintf(digest_out, 160, "%s", d);
                else if (d != NULL)
                    printf("%s/%s@%s\n", im.host, im.name, d);
                else
                    fprintf(stderr, "berth-isa: no variant of %s fits this %s node\n", image_arg, level);
                json_decref(j);
                return d != NULL ? 0 : EXIT_NO_VARIANT;
            }
            json_decref(j);
        } else {
            berth_http_dispose(&h);
        }
    }
    /* any OCI registry: fetch the index and match here, with the same library Berth uses */
    snprintf(url, sizeof(url), "/v2/%s/manifests/%s", im.name, im.ref);
    berth_http_t h;
    const char *accept =
        "Accept: application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, "
        "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
    if (berth_client_do(client, "GET", url, (const char *const[]){accept, NULL}, NULL, 0, &h) != 0 || h.status != 200) {
        fprintf(stderr, "berth-isa: %s%s: HTTP %ld\n", base, url, h.status);
        berth_http_dispose(&h);
        return 1;
    }
    berth_isa_report_t r;
    int rc = 1;
    int single = berth_isa_index_check(h.body, h.len, BERTH_ISA_POLICY_OFF, NULL, NULL, &r) != 0;
    if (single && digest_out != NULL && h.digest[0]) {
        snprintf(digest_out, 160, "%s", h.digest); /* one build only: its squashfs is the one */
        berth_http_dispose(&h);
        return 0;
    }
    if (single) {
        fprintf(stderr, "berth-isa: %s is a single manifest; nothing to choose\n", image_arg);
        berth_http_dispose(&h);
        return 1;
    }
    berth_isa_choice_t *ch = calloc(r.nvariants + 1, sizeof(*ch));
    berth_isa_policy_t pol = {0};
    if (maxl != NULL && berth_isa_level_parse(node.level.arch, maxl, &pol.max_level) == 0)
        pol.has_max_level = 1;
    int best = berth_isa_select(r.variants, r.nvariants, &node, &pol, ch);
    if (best >= 0 && digest_out != NULL) {
        snprintf(digest_out, 160, "%s", r.variants[best].digest);
        rc = 0;
    } else if (best >= 0) {
        printf("%s/%s@%s\n", im.host, im.name, r.variants[best].digest);
        rc = 0;
    } else {
        fprintf(stderr, "berth-isa: no variant of %s fits this %s node\n", image_arg, level);
        rc = EXIT_NO_VARIANT;
    }
    free(ch);
    berth_isa_report_dispose(&r);
    free(h.body);
    return rc;
}

/* hosts.toml sending containerd's pulls through Berth's ISA view for this node's level, the plain path as fallback */
static int cmd_containerd_hosts(int argc, char **argv)
{
    const char *host = opt(argc, argv, "--registry"), *dir = opt(argc, argv, "--dir");
    berth_isa_node_t node;
    if (host == NULL || node_of(argc, argv, &node) != 0) {
        fprintf(
            stderr,
            "usage: berth-isa containerd-hosts --registry HOST [--level auto|L] [--dir /etc/containerd/certs.d] [--plain-http]\n");
        return 2;
    }
    char level[24], path[1024];
    berth_isa_level_name(&node.level, level, sizeof(level));
    const char *scheme = flag(argc, argv, "--plain-http") ? "http" : "https";
    snprintf(path, sizeof(path), "%s/%s", dir != NULL ? dir : "/etc/containerd/certs.d", host);
    for (char *p = path + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "berth-isa: mkdir %s: %s\n", path, strerror(errno));
        return 1;
    }
    strncat(path, "/hosts.toml", sizeof(path) - strlen(path) - 1);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "berth-isa: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(
        f,
        "# written by berth-isa containerd-hosts: pulls go through Berth's ISA view for %s;\n"
        "# if the view fails, containerd falls back to server (the baseline build).\n"
        "server = \"%s://%s\"\n\n[host.\"%s://%s/v2/_isa/%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n",
        level, scheme, host, scheme, host, level);
    fclose(f);
    printf("%s\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: berth-isa detect|resolve|containerd-hosts [options]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = 2;
    if (strcmp(argv[1], "detect") == 0)
        rc = cmd_detect(argc - 1, argv + 1);
    else if (strcmp(argv[1], "resolve") == 0)
        rc = cmd_resolve(argc - 1, argv + 1);
    else if (strcmp(argv[1], "containerd-hosts") == 0)
        rc = cmd_containerd_hosts(argc - 1, argv + 1);
    else
        fprintf(stderr, "berth-isa: unknown command %s\n", argv[1]);
    curl_global_cleanup();
    return rc;
}
