/* Unit tests for auth/: scopes, the Authorization header, passwords and token signing/verification,
 * including the attacks the token verifier must refuse. */
#include <jansson.h>
#include <jwt.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/authz.h"
#include "auth/backoff.h"
#include "auth/header.h"
#include "auth/ldap.h"
#include "auth/password.h"
#include "auth/rbac.h"
#include "auth/scope.h"
#include "auth/token.h"
#include "tests/unit/tap.h"

#define S(x) x, strlen(x)

static void test_scopes(void)
{
    berth_scope_t s;
    berth_err_t err;
    char buf[300];
    ok(berth_scope_parse(&s, S("repository:library/ubuntu:pull,push"), &err) == 0 && strcmp(s.type, "repository") == 0 &&
           strcmp(s.name, "library/ubuntu") == 0 && s.actions == (BERTH_ACTION_PULL | BERTH_ACTION_PUSH),
       "repository scope");
    ok(berth_scope_parse(&s, S("repository(plugin):a/b:pull"), &err) == 0 && strcmp(s.type, "repository") == 0, "resource class");
    ok(berth_scope_parse(&s, S("registry:catalog:*"), &err) == 0 && s.actions == BERTH_ACTION_ALL, "catalog scope");
    ok(berth_scope_parse(&s, S("repository:a:pull,frobnicate,delete"), &err) == 0 &&
           s.actions == (BERTH_ACTION_PULL | BERTH_ACTION_DELETE),
       "unknown actions ignored");
    ok(berth_scope_parse(&s, S("repository:A/B:pull"), &err) != 0, "invalid name refused");
    ok(berth_scope_parse(&s, S("repository:a/../b:pull"), &err) != 0, "dot-dot refused");
    ok(berth_scope_parse(&s, S("registry:other:*"), &err) != 0 && berth_scope_parse(&s, S("user:a:pull"), &err) != 0,
       "unknown registry scope and type refused");
    ok(berth_scope_parse(&s, S("repository:a"), &err) != 0 && berth_scope_parse(&s, S("nocolon"), &err) != 0, "too few parts");
    berth_scope_parse(&s, S("repository:x/y:push,pull"), &err);
    ok(berth_scope_format(&s, buf, sizeof(buf)) > 0 && strcmp(buf, "repository:x/y:pull,push") == 0, "format");
}

static void test_headers(void)
{
    berth_auth_header_t h;
    ok(berth_auth_header_parse(&h, NULL, 0) == 0 && h.kind == BERTH_AUTH_NONE, "absent header");
    /* admin:Harbor12345 */
    ok(berth_auth_header_parse(&h, S("Basic YWRtaW46SGFyYm9yMTIzNDU=")) == 0 && h.kind == BERTH_AUTH_BASIC &&
           strcmp(h.user, "admin") == 0 && strcmp(h.secret, "Harbor12345") == 0,
       "basic");
    berth_auth_header_dispose(&h);
    /* u:p:with:colons */
    ok(berth_auth_header_parse(&h, S("basic dTpwOndpdGg6Y29sb25z")) == 0 && strcmp(h.secret, "p:with:colons") == 0,
       "password may contain colons; scheme is case-insensitive");
    ok(berth_auth_header_parse(&h, S("Basic YWRtaW46SGFyYm9yMTIzNDV=")) == -1 &&
           berth_auth_header_parse(&h, S("Basic dTpwOngy")) == 0 && berth_auth_header_parse(&h, S("Basic dTpwOng=")) == 0 &&
           berth_auth_header_parse(&h, S("Basic dTpwOnh=")) == -1 && berth_auth_header_parse(&h, S("Basic dTpwOg==")) == 0 &&
           berth_auth_header_parse(&h, S("Basic dTpwOh==")) == -1 && berth_auth_header_parse(&h, S("Basic dTpwO g=")) == -1,
       "base64 in its one canonical spelling only (no unused bits set, no blanks)");
    ok(berth_auth_header_parse(&h, S("Basic bm9jb2xvbg==")) != 0, "no colon");                               /* nocolon */
    ok(berth_auth_header_parse(&h, S("Basic YQBiOmM=")) == -2, "NUL in user refused as such");               /* a\0b:c */
    ok(berth_auth_header_parse(&h, S("Basic YTpiAGM=")) == -2, "NUL in the password refused");               /* a:b\0c */
    ok(berth_auth_header_parse(&h, S("Basic YTpiAWM=")) == -2, "control byte in the password refused");      /* a:b\1c */
    ok(berth_auth_header_parse(&h, S("Basic /zp4")) == -2, "user name not UTF-8 refused as bad input");      /* \xff:x */
    ok(berth_auth_header_parse(&h, S("Basic dTrD")) == -2, "secret cut mid-character refused as bad input"); /* u:\xc3 */
    ok(berth_auth_header_parse(&h, S("Basic w6k6eA==")) == 0 && strcmp(h.user, "\xc3\xa9") == 0, "UTF-8 user name accepted");
    ok(berth_auth_header_parse(&h, S("Basic !!!!")) != 0, "bad base64");
    ok(berth_auth_header_parse(&h, S("Basic OnB3")) != 0, "empty user"); /* :pw */
    ok(berth_auth_header_parse(&h, S("Bearer abc.def.ghi")) == 0 && h.kind == BERTH_AUTH_BEARER &&
           strcmp(h.token, "abc.def.ghi") == 0,
       "bearer");
    ok(berth_auth_header_parse(&h, S("Bearer abc def")) != 0 && berth_auth_header_parse(&h, S("Bearer a\"b")) != 0,
       "bearer with junk refused");
    ok(berth_auth_header_parse(&h, S("Digest x")) != 0 && berth_auth_header_parse(&h, S("Basic")) != 0, "other schemes");
}

static void test_passwords(void)
{
    char hash[BERTH_PASSWORD_HASH_MAX], hash2[BERTH_PASSWORD_HASH_MAX];
    ok(berth_password_hash(hash, "Harbor12345") == 0 && strncmp(hash, "$argon2id$", 10) == 0, "argon2id hash");
    ok(berth_password_verify(hash, "Harbor12345") && !berth_password_verify(hash, "Harbor12346") &&
           !berth_password_verify(hash, ""),
       "verify");
    ok(berth_password_hash(hash2, "Harbor12345") == 0 && strcmp(hash, hash2) != 0, "salted");
    /* a pair a whole login remembered is answered from memory after; a wrong password, or the same password
     * against another stored hash (a changed password), always runs argon2 */
    uint64_t a0, r0, a1, r1;
    berth_password_stats(&a0, &r0);
    ok(berth_password_verify(hash, "Harbor12345"), "verified, not yet remembered");
    berth_password_stats(&a1, &r1);
    ok(a1 == a0 + 1 && r1 == r0, "argon2 ran: a verification alone is not remembered");
    berth_password_remember(hash, "Harbor12345"); /* what a whole successful login does */
    berth_password_stats(&a0, &r0);
    ok(berth_password_verify(hash, "Harbor12345") && berth_password_verify(hash, "Harbor12345"), "verified again");
    berth_password_stats(&a1, &r1);
    ok(a1 == a0 && r1 == r0 + 2, "a verified pair costs no argon2 (argon2 +%llu, remembered +%llu)", (unsigned long long)(a1 - a0),
       (unsigned long long)(r1 - r0));
    ok(!berth_password_verify(hash, "Harbor12346") && !berth_password_verify(hash, "Harbor12346") &&
           !berth_password_verify(hash, "Harbor1234"),
       "wrong passwords refused every time");
    berth_password_stats(&a0, &r0);
    ok(a0 == a1 + 3 && r0 == r1, "each wrong password ran argon2 (argon2 +%llu, remembered +%llu)", (unsigned long long)(a0 - a1),
       (unsigned long long)(r0 - r1));
    ok(berth_password_verify(hash2, "Harbor12345"), "the other hash verifies");
    berth_password_stats(&a1, &r1);
    ok(a1 == a0 + 1 && r1 == r0, "another stored hash for the same password runs argon2");
    hash[strlen(hash) - 1] = hash[strlen(hash) - 1] == 'A' ? 'B' : 'A'; /* the stored string altered */
    ok(!berth_password_verify(hash, "Harbor12345"), "an altered stored hash is not found in memory");
    ok(!berth_password_verify("$2y$05$notargon", "x") && !berth_password_verify(NULL, "x"), "foreign hashes refused");
    ok(berth_password_policy("Harbor12345") == NULL, "policy accepts");
    ok(berth_password_policy("harbor12345") != NULL && berth_password_policy("Short1") != NULL &&
           berth_password_policy("NoDigitsHere") != NULL,
       "policy refuses");
}

static char *b64url(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n * 2 + 4);
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    size_t m = strlen(out);
    while (m > 0 && out[m - 1] == '=')
        out[--m] = '\0';
    for (size_t i = 0; i < m; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return out;
}

static void test_tokens(void)
{
    char dir[] = "/tmp/berth-token-XXXXXX", dir2[] = "/tmp/berth-token-XXXXXX";
    mkdtemp(dir);
    mkdtemp(dir2);
    berth_token_keys_t *k = NULL, *foreign = NULL, *again = NULL;
    berth_err_t err;
    ok(berth_token_keys_load(&k, dir, "ES256", &err) == 0, "keys generated");
    ok(berth_token_keys_load(&again, dir, NULL, &err) == 0 && strcmp(berth_token_kid(k), berth_token_kid(again)) == 0,
       "keys reloaded, same kid");
    ok(berth_token_keys_load(&foreign, dir2, NULL, &err) == 0 && strcmp(berth_token_kid(k), berth_token_kid(foreign)) != 0,
       "another key, another kid");
    ok(strlen(berth_token_kid(k)) == 59 && berth_token_kid(k)[4] == ':', "libtrust kid format");

    berth_scope_t grant;
    berth_scope_parse(&grant, S("repository:lib/app:pull"), &err);
    time_t now = time(NULL);
    char *tok = berth_token_issue(k, "berth", "berth-registry", "alice", 7, &grant, 1, now, 300), *tok2 = NULL;
    berth_token_claims_t c = {0}; /* read by the next checks even when verify failed */
    ok(tok != NULL && berth_token_verify(k, tok, "berth", "berth-registry", now, &c, &err) == 0, "round trip");
    ok(strcmp(c.subject, "alice") == 0 && c.account_id == 7 &&
           berth_token_allowed(&c, "repository", "lib/app") == BERTH_ACTION_PULL &&
           berth_token_allowed(&c, "repository", "lib/other") == 0,
       "exactly the granted access");
    berth_token_claims_dispose(&c);
    ok(berth_token_verify(again, tok, "berth", "berth-registry", now, &c, &err) == 0, "verifies after reload");
    berth_token_claims_dispose(&c);
    ok(berth_token_verify(k, tok, "berth", "berth-registry", now + 300 + BERTH_TOKEN_LEEWAY + 1, &c, &err) != 0, "expired refused");
    ok(berth_token_verify(k, tok, "berth", "berth-registry", now + 300 + BERTH_TOKEN_LEEWAY - 1, &c, &err) == 0,
       "within leeway accepted");
    berth_token_claims_dispose(&c);
    ok(berth_token_verify(k, tok, "berth", "berth-registry", now - BERTH_TOKEN_LEEWAY - 5, &c, &err) != 0, "not yet valid refused");
    ok(berth_token_verify(k, tok, "berth", "other-service", now, &c, &err) != 0, "wrong audience refused");
    ok(berth_token_verify(k, tok, "mallory", "berth-registry", now, &c, &err) != 0, "wrong issuer refused");
    ok(berth_token_verify(foreign, tok, "berth", "berth-registry", now, &c, &err) != 0, "foreign key refused");

    /* tampering: swap the payload for one granting push */
    char *dot1 = strchr(tok, '.'), *dot2 = strchr(dot1 + 1, '.');
    char payload[512];
    snprintf(payload, sizeof(payload),
             "{\"iss\":\"berth\",\"sub\":\"alice\",\"aud\":\"berth-registry\",\"exp\":%ld,\"nbf\":%ld,\"iat\":%ld,"
             "\"access\":[{\"type\":\"repository\",\"name\":\"lib/app\",\"actions\":[\"pull\",\"push\"]}]}",
             (long)now + 300, (long)now, (long)now);
    char *p64 = b64url(payload), forged[8192];
    snprintf(forged, sizeof(forged), "%.*s.%s%s", (int)(dot1 - tok), tok, p64, dot2);
    ok(berth_token_verify(k, forged, "berth", "berth-registry", now, &c, &err) != 0, "tampered payload refused");
    /* alg none */
    char *h64 = b64url("{\"alg\":\"none\",\"typ\":\"JWT\"}");
    snprintf(forged, sizeof(forged), "%s.%s.", h64, p64);
    ok(berth_token_verify(k, forged, "berth", "berth-registry", now, &c, &err) != 0, "alg none refused");
    free(h64);
    /* algorithm confusion: HS256 keyed with our public key */
    jwt_t *jwt;
    jwt_new(&jwt);
    jwt_add_grants_json(jwt, payload);
    const char *pub = berth_token_public_pem(k);
    jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)pub, (int)strlen(pub));
    char *hs = jwt_encode_str(jwt);
    jwt_free(jwt);
    ok(hs != NULL && berth_token_verify(k, hs, "berth", "berth-registry", now, &c, &err) != 0 &&
           strstr(err.msg, "algorithm") != NULL,
       "HS256 keyed with the public key refused");
    free(hs);
    free(p64);
    free(tok);
    /* RS256, when configured: its own key kind, and only RS256 accepted by it */
    char dir3[] = "/tmp/berth-token-XXXXXX";
    mkdtemp(dir3);
    berth_token_keys_t *rsa = NULL, *wrong = NULL;
    ok(berth_token_keys_load(&wrong, dir, "RS256", &err) != 0 && strstr(err.msg, "not for RS256") != NULL,
       "an EC key is not silently used for RS256");
    ok(berth_token_keys_load(&rsa, dir3, "RS256", &err) == 0, "RSA key generated for RS256");
    ok(berth_token_keys_load(&wrong, dir3, "HS256", &err) != 0, "other algorithms refused in configuration");
    char *rtok = berth_token_issue(rsa, "berth", "berth-registry", "alice", 7, &grant, 1, now, 300);
    char *rdot = rtok != NULL ? strchr(rtok, '.') : NULL;
    char rhdr[256] = "";
    if (rdot != NULL)
        snprintf(rhdr, sizeof(rhdr), "%.*s", (int)(rdot - rtok), rtok);
    ok(rtok != NULL && berth_token_verify(rsa, rtok, "berth", "berth-registry", now, &c, &err) == 0, "RS256 round trip");
    berth_token_claims_dispose(&c);
    ok(berth_token_verify(k, rtok, "berth", "berth-registry", now, &c, &err) != 0, "an ES256 service refuses RS256 tokens");
    ok(berth_token_verify(rsa, tok2 = berth_token_issue(k, "berth", "berth-registry", "alice", 7, &grant, 1, now, 300), "berth",
                          "berth-registry", now, &c, &err) != 0,
       "an RS256 service refuses ES256 tokens");
    free(tok2);
    free(rtok);
    berth_token_keys_free(rsa);
    berth_token_keys_free(k);
    berth_token_keys_free(again);
    berth_token_keys_free(foreign);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s", dir, dir2, dir3);
    ok(system(cmd) == 0, "cleanup"); // NOLINT(cert-env33-c): removes the test's own mkdtemp directories
}

static void test_rbac(void)
{
    berth_subject_t anon = {0}, admin = {.authenticated = 1, .sysadmin = 1};
    berth_subject_t pa = {1, 0, BERTH_ROLE_PROJECT_ADMIN}, mt = {1, 0, BERTH_ROLE_MAINTAINER}, dev = {1, 0, BERTH_ROLE_DEVELOPER},
                    guest = {1, 0, BERTH_ROLE_GUEST}, lg = {1, 0, BERTH_ROLE_LIMITED_GUEST}, outsider = {1, 0, BERTH_ROLE_NONE};
    unsigned pp = BERTH_ACTION_PULL | BERTH_ACTION_PUSH, all = pp | BERTH_ACTION_DELETE;
    ok(berth_rbac_repository_scope(&admin, 0) == all, "system admin: everything");
    ok(berth_rbac_repository_scope(&pa, 0) == all && berth_rbac_repository_scope(&mt, 0) == all,
       "projectAdmin, maintainer: delete");
    ok(berth_rbac_repository_scope(&dev, 0) == pp, "developer: push, no delete");
    ok(berth_rbac_repository_scope(&guest, 0) == BERTH_ACTION_PULL && berth_rbac_repository_scope(&lg, 0) == BERTH_ACTION_PULL,
       "guest, limitedGuest: pull only");
    ok(berth_rbac_repository_scope(&anon, 0) == 0 && berth_rbac_repository_scope(&outsider, 0) == 0,
       "anonymous and non-members: nothing on a private project");
    ok(berth_rbac_repository_scope(&anon, 1) == BERTH_ACTION_PULL && berth_rbac_repository_scope(&outsider, 1) == BERTH_ACTION_PULL,
       "public project: pull for everyone");
    ok(berth_rbac_repository_scope(&dev, 1) == pp, "public adds to a role, never removes");
    ok(!berth_rbac_allows(&lg, 0, BERTH_RES_MEMBER, BERTH_ACT_LIST) &&
           berth_rbac_allows(&guest, 0, BERTH_RES_MEMBER, BERTH_ACT_LIST),
       "limitedGuest cannot list members, guest can");
    ok(berth_rbac_allows(&pa, 0, BERTH_RES_LOG, BERTH_ACT_LIST) && !berth_rbac_allows(&mt, 0, BERTH_RES_LOG, BERTH_ACT_LIST),
       "project logs: projectAdmin only");
    ok(!berth_rbac_allows(&dev, 0, BERTH_RES_TAG, BERTH_ACT_DELETE) && berth_rbac_allows(&mt, 0, BERTH_RES_TAG, BERTH_ACT_DELETE),
       "tag delete: maintainer and up");
    ok(!berth_rbac_allows(&anon, 1, BERTH_RES_MEMBER, BERTH_ACT_READ), "public projects do not expose members");
    ok(!berth_rbac_allows(&admin, 0, BERTH_RES__COUNT, BERTH_ACT_READ) && !berth_rbac_allows(&pa, 0, BERTH_RES_PROJECT, 0),
       "unknown resources and empty requests are denied");
}

static void test_permission_names(void)
{
    berth_resource_t r;
    unsigned a;
    ok(berth_authz_parse_permission("repository", "push", &r, &a) == 0 && r == BERTH_RES_REPOSITORY && a == BERTH_ACT_PUSH,
       "robot permission parsed");
    ok(berth_authz_parse_permission("repository", "fly", &r, &a) != 0 && berth_authz_parse_permission("user", "read", &r, &a) != 0,
       "names outside the matrix refused");
    ok(strcmp(berth_authz_resource_name(BERTH_RES_MEMBER), "member") == 0 &&
           strcmp(berth_authz_action_name(BERTH_ACT_LIST), "list") == 0 && berth_authz_action_name(3) == NULL,
       "names round trip");
    berth_authz_t z = {.exists = 1};
    z.actions[BERTH_RES_REPOSITORY] = BERTH_ACT_PUSH;
    ok(berth_authz_repository_scope(&z) == 0, "push without pull grants nothing (Harbor)");
    z.actions[BERTH_RES_REPOSITORY] |= BERTH_ACT_PULL;
    ok(berth_authz_repository_scope(&z) == (BERTH_ACTION_PULL | BERTH_ACTION_PUSH), "pull and push");
}

static void test_ldap_strings(void)
{
    char out[128];
    ok(berth_ldap_escape("*)(uid=*", out, sizeof(out)) == 0 && strcmp(out, "\\2a\\29\\28uid=\\2a") == 0, "filter specials escaped");
    ok(berth_ldap_escape("a\\b", out, sizeof(out)) == 0 && strcmp(out, "a\\5cb") == 0, "backslash escaped");
    ok(berth_ldap_escape("alice", out, sizeof(out)) == 0 && strcmp(out, "alice") == 0, "plain names unchanged");
    ok(berth_ldap_escape("((((", out, 8) == -1, "too long for the buffer: refused, not truncated");
    berth_ldap_dn_normalize("CN=Devs, OU=Groups ,DC=Berth", out, sizeof(out));
    ok(strcmp(out, "cn=devs,ou=groups,dc=berth") == 0, "DN normalized");
}

static void test_backoff(void)
{
    for (int i = 0; i < BERTH_BACKOFF_FREE - 1; i++)
        berth_backoff_record("Victim", "10.0.0.1", 0);
    ok(berth_backoff_wait("victim", "10.0.0.1") == 0, "four failures: still free");
    for (int i = 0; i < 50; i++) /* another name's failures never touch this one's count */
        berth_backoff_record("other", "10.0.0.1", 0);
    berth_backoff_record("VICTIM", "10.0.0.1", 0);
    ok(berth_backoff_wait("victim", "10.0.0.1") >= 1, "the fifth failure, in any spelling, starts the back-off");
    ok(berth_backoff_wait("victim", "10.0.0.2") == 0, "another address is not held back");
    berth_backoff_record("victim", "10.0.0.1", 1);
    /* the first back-off lasts a whole second even when it starts just before the clock's second ticks over
       (whole-second times let it end 1 ms later: integration_credentials failed on it in CI) */
    struct timespec ts;
    do
        clock_gettime(CLOCK_REALTIME, &ts);
    while (ts.tv_nsec < 900000000L);
    for (int i = 0; i < BERTH_BACKOFF_FREE; i++)
        berth_backoff_record("ticker", "10.0.0.1", 0);
    nanosleep(&(struct timespec){.tv_nsec = 200000000L}, NULL);
    ok(berth_backoff_wait("ticker", "10.0.0.1") == 1, "a back-off of one second outlasts the clock's next second");
    ok(berth_backoff_wait("victim", "10.0.0.1") == 0, "a success clears it");
    char addr[32];
    for (int i = 0; i < BERTH_BACKOFF_FREE_ANY; i++) { /* one guess each from many addresses */
        snprintf(addr, sizeof(addr), "10.1.%d.%d", i / 250, i % 250);
        berth_backoff_record("spread", addr, 0);
    }
    ok(berth_backoff_wait("spread", "10.9.9.9") >= 1, "guesses spread over addresses meet the name's own back-off");
    berth_backoff_record("spread", "10.9.9.9", 1);
    ok(berth_backoff_wait("spread", "10.9.9.8") == 0, "which a success clears");
    /* eight failures past the free ones: a 128-second back-off, which a slow (sanitized) flood below cannot
       outlast; with only the first second of back-off the entry expired mid-flood in CI and was evicted */
    for (int i = 0; i < BERTH_BACKOFF_FREE + 7; i++)
        berth_backoff_record("held", "10.0.0.9", 0);
    char name[32];
    for (int i = 0; i < 3 * BERTH_BACKOFF_ENTRIES; i++) { /* a flood of one-off names: the table stays bounded */
        snprintf(name, sizeof(name), "flood%d", i);
        berth_backoff_record(name, "10.0.0.3", 0);
    }
    ok(berth_backoff_size() <= BERTH_BACKOFF_ENTRIES, "bounded");
    ok(berth_backoff_wait("held", "10.0.0.9") >= 1, "eviction prefers entries not in back-off");
}

int main(void)
{
    test_backoff();
    test_ldap_strings();
    test_permission_names();
    test_rbac();
    test_scopes();
    test_headers();
    test_passwords();
    test_tokens();
    return tap_done();
}
