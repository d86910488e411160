#include "auth/ldap.h"

#define LDAP_DEPRECATED 0
#include <ctype.h>
#include <jansson.h>
#include <lber.h>
#include <ldap.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "auth/header.h"
#include "auth/offload.h"
#include "core/log.h"

#define POOL_MAX 8
#define GROUPS_MAX 4096
#define SLOTS_MAX 64
/* A directory whose oldest running exchange is older than this is "slow": callers are shed at once */
#define SLOW_MS 500
#define TERM_MAX 256 /* search terms; an LDAP user name is never longer */

struct st_berth_ldap_t {
    berth_ldap_conf_t c; /* strings below are owned copies */
    char *strs[16];
    pthread_mutex_t mu;
    LDAP *pool[POOL_MAX]; /* idle connections bound as the service account */
    int npool;
    pthread_cond_t slot_free;
    struct timespec since[SLOTS_MAX]; /* start of each running exchange (tv_sec 0: slot free) */
    int busy;
    const char *group_search_base; /* group_base_dn as configured (c.group_base_dn is normalized) */
};

static const char *own(berth_ldap_t *l, int i, const char *s)
{
    l->strs[i] = strdup(s != NULL ? s : "");
    return l->strs[i];
}

int berth_ldap_open(berth_ldap_t **out, const berth_ldap_conf_t *conf, berth_err_t *err)
{
    if (conf->url == NULL || conf->url[0] == '\0' || conf->base_dn == NULL || conf->base_dn[0] == '\0')
        return berth_err_set(err, BERTH_OCI_INTERNAL, "ldap.url and ldap.base_dn are required");
    berth_ldap_t *l = calloc(1, sizeof(*l));
    l->c = *conf;
    int i = 0;
    l->c.url = own(l, i++, conf->url);
    l->c.search_dn = own(l, i++, conf->search_dn);
    l->c.search_password = own(l, i++, conf->search_password);
    l->c.base_dn = own(l, i++, conf->base_dn);
    l->c.user_filter = own(l, i++, conf->user_filter);
    l->c.uid_attr = own(l, i++, conf->uid_attr != NULL && conf->uid_attr[0] ? conf->uid_attr : "uid");
    l->c.ca_file = own(l, i++, conf->ca_file);
    l->group_search_base = own(l, i++, conf->group_base_dn != NULL && conf->group_base_dn[0] ? conf->group_base_dn : conf->base_dn);
    l->c.group_filter = own(l, i++, conf->group_filter);
    l->c.group_name_attr = own(l, i++, conf->group_name_attr != NULL && conf->group_name_attr[0] ? conf->group_name_attr : "cn");
    l->c.membership_attr =
        own(l, i++, conf->membership_attr != NULL && conf->membership_attr[0] ? conf->membership_attr : "memberOf");
    char norm[1024];
    berth_ldap_dn_normalize(conf->group_admin_dn != NULL ? conf->group_admin_dn : "", norm, sizeof(norm));
    l->c.group_admin_dn = own(l, i++, norm);
    berth_ldap_dn_normalize(conf->group_base_dn != NULL ? conf->group_base_dn : "", norm, sizeof(norm));
    l->c.group_base_dn = own(l, i++, norm);
    if (l->c.timeout <= 0)
        l->c.timeout = 5;
    if (l->c.max_concurrent <= 0)
        l->c.max_concurrent = 3;
    if (l->c.max_concurrent > SLOTS_MAX)
        l->c.max_concurrent = SLOTS_MAX;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->slot_free, &ca);
    pthread_condattr_destroy(&ca);
    *out = l;
    return 0;
}

void berth_ldap_close(berth_ldap_t *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < l->npool; i++)
        ldap_unbind_ext_s(l->pool[i], NULL, NULL);
    for (size_t i = 0; i < sizeof(l->strs) / sizeof(l->strs[0]); i++) {
        if (l->strs[i] != NULL)
            OPENSSL_cleanse(l->strs[i], strlen(l->strs[i]));
        free(l->strs[i]);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->slot_free);
    free(l);
}

int berth_ldap_escape(const char *in, char *out, size_t outsz)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        int special = *p == '*' || *p == '(' || *p == ')' || *p == '\\';
        if (o + (special ? 3 : 1) >= outsz)
            return -1;
        if (special)
            o += (size_t)snprintf(out + o, outsz - o, "\\%02x", *p);
        else
            out[o++] = (char)*p;
    }
    if (o >= outsz)
        return -1;
    out[o] = '\0';
    return 0;
}

void berth_ldap_dn_normalize(const char *in, char *out, size_t outsz)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < outsz; p++) {
        if (*p == ' ' && (o == 0 || out[o - 1] == ',' || out[o - 1] == '=' || out[o - 1] == '+' || p[1] == ',' || p[1] == '=' ||
                          p[1] == '+' || p[1] == ' ' || p[1] == '\0'))
            continue;
        out[o++] = (char)tolower((unsigned char)*p);
    }
    out[o] = '\0';
}

void berth_ldap_user_dispose(berth_ldap_user_t *u)
{
    for (size_t i = 0; i < u->ngroups; i++)
        free(u->groups[i]);
    free(u->groups);
    u->groups = NULL;
    u->ngroups = 0;
}

/*
 * One deadline per exchange: connect, StartTLS, the service bind, the search and the user's bind together get
 * ldap.timeout_seconds, so a hung directory answers 503 within one timeout, never a multiple of it.
 */
static struct timespec deadline_in(int seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += seconds;
    return t;
}

static long ms_until(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(t->tv_sec - now.tv_sec) * 1000 + (t->tv_nsec - now.tv_nsec) / 1000000;
}

/* The time left as a timeval; 0, or -1 when the deadline has passed */
static int time_left(const struct timespec *deadline, struct timeval *tv)
{
    long ms = ms_until(deadline);
    if (ms <= 0)
        return -1;
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
    return 0;
}

static int expired(berth_err_t *err)
{
    berth_log_warn("ldap: no answer within ldap.timeout_seconds");
    return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "LDAP unavailable (timed out)");
}

/*
 * At most ldap.max_concurrent exchanges run at once, so a hung directory holds that many auth workers and no
 * more. While the directory answers quickly a caller waits a moment for a slot (a burst of logins); once the
 * oldest running exchange is older than SLOW_MS, callers are shed at once with 503 instead of queueing behind it.
 */
static int slot_enter(berth_ldap_t *l, const struct timespec *deadline, int *slot, berth_err_t *err)
{
    struct timespec now, wait_until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    wait_until = now;
    wait_until.tv_nsec += SLOW_MS * 1000000L;
    wait_until.tv_sec += wait_until.tv_nsec / 1000000000L;
    wait_until.tv_nsec %= 1000000000L;
    if (wait_until.tv_sec > deadline->tv_sec || (wait_until.tv_sec == deadline->tv_sec && wait_until.tv_nsec > deadline->tv_nsec))
        wait_until = *deadline;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->busy < l->c.max_concurrent) {
            for (int i = 0; i < l->c.max_concurrent; i++)
                if (l->since[i].tv_sec == 0) {
                    clock_gettime(CLOCK_MONOTONIC, &l->since[i]);
                    l->busy++;
                    *slot = i;
                    pthread_mutex_unlock(&l->mu);
                    return 0;
                }
        }
        long oldest = 0;
        for (int i = 0; i < l->c.max_concurrent; i++)
            if (l->since[i].tv_sec != 0 && -ms_until(&l->since[i]) > oldest)
                oldest = -ms_until(&l->since[i]);
        if (oldest > SLOW_MS || pthread_cond_timedwait(&l->slot_free, &l->mu, &wait_until) != 0) {
            pthread_mutex_unlock(&l->mu);
            berth_log_warn("ldap: %d exchanges already waiting on the directory; login shed", l->c.max_concurrent);
            return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "LDAP unavailable (directory busy or slow)");
        }
    }
}

static void slot_leave(berth_ldap_t *l, int slot)
{
    pthread_mutex_lock(&l->mu);
    l->since[slot].tv_sec = 0;
    l->busy--;
    pthread_cond_signal(&l->slot_free);
    pthread_mutex_unlock(&l->mu);
}

/* Every exchange starts here: on an auth worker, within a slot, with one deadline */
static int begin(berth_ldap_t *l, struct timespec *deadline, int *slot, berth_err_t *err)
{
    if (!berth_offload_here())
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "LDAP work moves to the auth workers");
    *deadline = deadline_in(l->c.timeout);
    return slot_enter(l, deadline, slot, err);
}

static int unavailable(berth_err_t *err, const char *what, int rc)
{
    berth_log_warn("ldap: %s: %s", what, ldap_err2string(rc));
    return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "LDAP unavailable (%s)", ldap_err2string(rc));
}

/* A new connection with timeouts and TLS settings applied; StartTLS when configured. */
static int connect_ldap(berth_ldap_t *l, const struct timespec *deadline, LDAP **out, berth_err_t *err)
{
    struct timeval tv;
    if (time_left(deadline, &tv) != 0)
        return expired(err);
    LDAP *ld = NULL;
    int rc = ldap_initialize(&ld, l->c.url);
    if (rc != LDAP_SUCCESS)
        return unavailable(err, "initialize", rc);
    int v3 = LDAP_VERSION3, req = l->c.verify_cert ? LDAP_OPT_X_TLS_DEMAND : LDAP_OPT_X_TLS_NEVER, zero = 0;
    ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &v3);
    ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
    ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
    ldap_set_option(ld, LDAP_OPT_TIMEOUT, &tv); /* every synchronous call, binds included; reset per use */
    ldap_set_option(ld, LDAP_OPT_X_TLS_REQUIRE_CERT, &req);
    if (l->c.ca_file[0] != '\0')
        ldap_set_option(ld, LDAP_OPT_X_TLS_CACERTFILE, l->c.ca_file);
    ldap_set_option(ld, LDAP_OPT_X_TLS_NEWCTX, &zero);
    if (l->c.starttls && (rc = ldap_start_tls_s(ld, NULL, NULL)) != LDAP_SUCCESS) {
        ldap_unbind_ext_s(ld, NULL, NULL);
        return unavailable(err, "StartTLS", rc);
    }
    *out = ld;
    return 0;
}

static int simple_bind(LDAP *ld, const char *dn, const char *pw)
{
    struct berval cred = {.bv_val = (char *)pw, .bv_len = strlen(pw)};
    return ldap_sasl_bind_s(ld, dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, NULL);
}

/* What is left of the deadline becomes the timeout of the next synchronous call on ld */
static int arm(LDAP *ld, const struct timespec *deadline)
{
    struct timeval tv;
    if (time_left(deadline, &tv) != 0)
        return -1;
    ldap_set_option(ld, LDAP_OPT_TIMEOUT, &tv);
    ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
    return 0;
}

/* A connection bound as the service account, from the pool or new */
static int borrow(berth_ldap_t *l, const struct timespec *deadline, LDAP **out, berth_err_t *err)
{
    pthread_mutex_lock(&l->mu);
    LDAP *ld = l->npool > 0 ? l->pool[--l->npool] : NULL;
    pthread_mutex_unlock(&l->mu);
    if (ld != NULL) {
        if (arm(ld, deadline) != 0) {
            ldap_unbind_ext_s(ld, NULL, NULL);
            return expired(err);
        }
        *out = ld;
        return 0;
    }
    int rc = connect_ldap(l, deadline, &ld, err);
    if (rc != 0)
        return rc;
    if ((rc = arm(ld, deadline) == 0 ? simple_bind(ld, l->c.search_dn, l->c.search_password) : LDAP_TIMEOUT) != LDAP_SUCCESS) {
        ldap_unbind_ext_s(ld, NULL, NULL);
        if (rc == LDAP_INVALID_CREDENTIALS)
            return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "LDAP search account rejected");
        return unavailable(err, "service bind", rc);
    }
    *out = ld;
    return 0;
}

static void give_back(berth_ldap_t *l, LDAP *ld, int healthy)
{
    pthread_mutex_lock(&l->mu);
    if (healthy && l->npool < POOL_MAX) {
        l->pool[l->npool++] = ld;
        ld = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    if (ld != NULL)
        ldap_unbind_ext_s(ld, NULL, NULL);
}

static int is_connection_error(int rc)
{
    return rc == LDAP_SERVER_DOWN || rc == LDAP_TIMEOUT || rc == LDAP_CONNECT_ERROR || rc == LDAP_UNAVAILABLE || rc == LDAP_BUSY;
}

/*
 * Search with a pooled connection; a broken pooled connection is replaced once. On success *ldout is the
 * connection (read the entries with it, then give_back).
 */
static int search(berth_ldap_t *l, const struct timespec *deadline, const char *base, int scope, const char *filter, char **attrs,
                  int sizelimit, LDAPMessage **res, LDAP **ldout, berth_err_t *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        LDAP *ld;
        int rc = borrow(l, deadline, &ld, err);
        if (rc != 0)
            return rc;
        struct timeval tv;
        if (time_left(deadline, &tv) != 0) {
            give_back(l, ld, 0);
            return expired(err);
        }
        *res = NULL;
        rc = ldap_search_ext_s(ld, base, scope, filter, attrs, 0, NULL, NULL, &tv, sizelimit, res);
        if (rc == LDAP_SUCCESS || rc == LDAP_SIZELIMIT_EXCEEDED || rc == LDAP_NO_SUCH_OBJECT) {
            *ldout = ld;
            return 0;
        }
        ldap_msgfree(*res);
        *res = NULL;
        give_back(l, ld, 0);
        if (!is_connection_error(rc) || attempt == 1 || ms_until(deadline) <= 0)
            return unavailable(err, "search", rc);
    }
    return BERTH_EUNAVAIL;
}

static void first_value(LDAP *ld, LDAPMessage *e, const char *attr, char *out, size_t outsz)
{
    struct berval **v = ldap_get_values_len(ld, e, attr);
    out[0] = '\0';
    if (v != NULL && v[0] != NULL)
        snprintf(out, outsz, "%.*s", (int)v[0]->bv_len, v[0]->bv_val);
    ldap_value_free_len(v);
}

static int under(const char *dn, const char *base)
{
    size_t n = strlen(dn), b = strlen(base);
    return b == 0 || (n >= b && strcmp(dn + n - b, base) == 0 && (n == b || dn[n - b - 1] == ','));
}

/*
 * The value of the uid attribute that names the user as the directory spells it: among the entry's values, the
 * one equal to what was typed compared as uid is compared (case-insensitively). "" when none is.
 */
static void canonical_name(LDAP *ld, LDAPMessage *e, const char *attr, const char *typed, char *out, size_t outsz)
{
    struct berval **v = ldap_get_values_len(ld, e, attr);
    out[0] = '\0';
    for (int i = 0; v != NULL && v[i] != NULL; i++)
        if (v[i]->bv_len == strlen(typed) && strncasecmp(v[i]->bv_val, typed, v[i]->bv_len) == 0) {
            snprintf(out, outsz, "%.*s", (int)v[i]->bv_len, v[i]->bv_val);
            break;
        }
    ldap_value_free_len(v);
}

/* Find exactly one user entry for `username`; fills out (not the password check) */
static int find_user(berth_ldap_t *l, const struct timespec *deadline, const char *username, berth_ldap_user_t *out,
                     berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    char esc[800], filter[1400];
    if (username[0] == '\0' || strlen(username) > TERM_MAX || !berth_auth_credential_ok(username, strlen(username)) ||
        berth_ldap_escape(username, esc, sizeof(esc)) != 0)
        return BERTH_ENOTFOUND;
    snprintf(filter, sizeof(filter), "(&%s(%s=%s))", l->c.user_filter[0] ? l->c.user_filter : "(objectClass=*)", l->c.uid_attr,
             esc);
    char *attrs[] = {(char *)l->c.uid_attr, "mail", "cn", "displayName", (char *)l->c.membership_attr, NULL};
    LDAPMessage *res = NULL;
    LDAP *ld = NULL;
    int rc = search(l, deadline, l->c.base_dn, l->c.scope, filter, attrs, 2, &res, &ld, err);
    if (rc != 0)
        return rc;
    int n = ldap_count_entries(ld, res);
    rc = BERTH_ENOTFOUND;
    LDAPMessage *e = n == 1 ? ldap_first_entry(ld, res) : NULL;
    if (e != NULL) {
        char *dn = ldap_get_dn(ld, e);
        snprintf(out->dn, sizeof(out->dn), "%s", dn != NULL ? dn : "");
        ldap_memfree(dn);
        canonical_name(ld, e, l->c.uid_attr, username, out->username, sizeof(out->username));
        first_value(ld, e, "mail", out->email, sizeof(out->email));
        first_value(ld, e, "displayName", out->realname, sizeof(out->realname));
        if (out->realname[0] == '\0')
            first_value(ld, e, "cn", out->realname, sizeof(out->realname));
        struct berval **g = ldap_get_values_len(ld, e, l->c.membership_attr);
        size_t ng = g != NULL ? (size_t)ldap_count_values_len(g) : 0;
        out->groups = calloc(ng + 1, sizeof(char *));
        for (size_t i = 0; i < ng && out->ngroups < GROUPS_MAX; i++) {
            char raw[1024], norm[1024];
            snprintf(raw, sizeof(raw), "%.*s", (int)g[i]->bv_len, g[i]->bv_val);
            berth_ldap_dn_normalize(raw, norm, sizeof(norm));
            if (!under(norm, l->c.group_base_dn))
                continue;
            if (l->c.group_admin_dn[0] != '\0' && strcmp(norm, l->c.group_admin_dn) == 0)
                out->admin = 1;
            out->groups[out->ngroups++] = strdup(norm);
        }
        ldap_value_free_len(g);
        /* matched some other way than by its name (the directory ignores inner spaces, say): not this user */
        rc = out->username[0] != '\0' ? 0 : BERTH_ENOTFOUND;
    } else if (n > 1) {
        berth_log_warn("ldap: %d entries match one user name; refusing", n);
    }
    ldap_msgfree(res);
    give_back(l, ld, 1);
    if (rc != 0)
        berth_ldap_user_dispose(out);
    return rc;
}

int berth_ldap_lookup(berth_ldap_t *l, const char *username, berth_ldap_user_t *out, berth_err_t *err)
{
    struct timespec deadline;
    int slot, rc = begin(l, &deadline, &slot, err);
    if (rc != 0)
        return rc;
    rc = find_user(l, &deadline, username, out, err);
    slot_leave(l, slot);
    return rc;
}

int berth_ldap_login(berth_ldap_t *l, const char *username, const char *password, berth_ldap_user_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    if (password == NULL || password[0] == '\0' || !berth_auth_credential_ok(password, strlen(password)))
        return BERTH_EUNAUTH; /* an empty password would be an unauthenticated bind, which "succeeds" */
    struct timespec deadline;
    int slot, rc = begin(l, &deadline, &slot, err);
    if (rc != 0)
        return rc;
    rc = find_user(l, &deadline, username, out, err);
    if (rc == BERTH_ENOTFOUND)
        rc = BERTH_EUNAUTH;
    LDAP *ld = NULL;
    if (rc == 0 && (rc = connect_ldap(l, &deadline, &ld, err)) != 0)
        berth_ldap_user_dispose(out);
    if (rc != 0) {
        slot_leave(l, slot);
        return rc;
    }
    int b = arm(ld, &deadline) == 0 ? simple_bind(ld, out->dn, password) : LDAP_TIMEOUT;
    ldap_unbind_ext_s(ld, NULL, NULL);
    slot_leave(l, slot);
    if (b == LDAP_SUCCESS)
        return 0;
    berth_ldap_user_dispose(out);
    if (b == LDAP_INVALID_CREDENTIALS || b == LDAP_INAPPROPRIATE_AUTH || b == LDAP_UNWILLING_TO_PERFORM)
        return BERTH_EUNAUTH;
    return unavailable(err, "user bind", b);
}

int berth_ldap_ping(berth_ldap_t *l, berth_err_t *err)
{
    struct timespec deadline;
    int slot, rc = begin(l, &deadline, &slot, err);
    if (rc != 0)
        return rc;
    LDAP *ld;
    if ((rc = borrow(l, &deadline, &ld, err)) == 0)
        give_back(l, ld, 1);
    slot_leave(l, slot);
    return rc;
}

/* Run a search and turn each entry into a JSON object of (key ← attribute) pairs plus the DN */
static int search_json(berth_ldap_t *l, const char *base, int scope, const char *filter, const char *const *keys,
                       const char *const *attrs_in, size_t nattrs, const char *dn_key, size_t max, char **json_out,
                       berth_err_t *err)
{
    char *attrs[8] = {0};
    for (size_t i = 0; i < nattrs && i < 7; i++)
        attrs[i] = (char *)attrs_in[i];
    LDAPMessage *res = NULL;
    LDAP *ld = NULL;
    struct timespec deadline;
    int slot, rc = begin(l, &deadline, &slot, err);
    if (rc != 0)
        return rc;
    rc = search(l, &deadline, base, scope, filter, attrs, (int)max, &res, &ld, err);
    slot_leave(l, slot);
    if (rc != 0)
        return rc;
    json_t *arr = json_array();
    for (LDAPMessage *e = ldap_first_entry(ld, res); e != NULL && json_array_size(arr) < max; e = ldap_next_entry(ld, e)) {
        json_t *o = json_object();
        for (size_t i = 0; i < nattrs; i++) {
            char v[512];
            first_value(ld, e, attrs_in[i], v, sizeof(v));
            json_object_set_new(o, keys[i], json_string(v));
        }
        char *dn = ldap_get_dn(ld, e);
        json_object_set_new(o, dn_key, json_string(dn != NULL ? dn : ""));
        ldap_memfree(dn);
        json_array_append_new(arr, o);
    }
    ldap_msgfree(res);
    give_back(l, ld, 1);
    *json_out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return 0;
}

/* A search term: bounded, no control bytes. An empty term lists everything (bounded by max). */
static int term_valid(const char *term, berth_err_t *err)
{
    if (strlen(term) > TERM_MAX || !berth_auth_credential_ok(term, strlen(term)))
        return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "the search term must be at most %d characters without control characters",
                             TERM_MAX);
    return 0;
}

/* "(attr=*term*)", or "(attr=*)" for an empty term ("**" is no valid filter) */
static int substring_filter(const char *base_filter, const char *attr, const char *term, char *filter, size_t fsz, berth_err_t *err)
{
    char esc[800];
    if (term_valid(term, err) != 0 || berth_ldap_escape(term, esc, sizeof(esc)) != 0)
        return err->code != 0 ? err->code : berth_err_set(err, BERTH_OCI_BAD_REQUEST, "search term too long");
    snprintf(filter, fsz, "(&%s(%s=*%s%s))", base_filter[0] ? base_filter : "(objectClass=*)", attr, esc, esc[0] ? "*" : "");
    return 0;
}

int berth_ldap_search_users(berth_ldap_t *l, const char *term, size_t max, char **json_out, berth_err_t *err)
{
    char filter[1400];
    berth_err_clear(err);
    if (substring_filter(l->c.user_filter, l->c.uid_attr, term != NULL ? term : "", filter, sizeof(filter), err) != 0)
        return err->code;
    const char *keys[] = {"username", "realname", "email"}, *attrs[] = {l->c.uid_attr, "cn", "mail"};
    return search_json(l, l->c.base_dn, l->c.scope, filter, keys, attrs, 3, "ldap_dn", max, json_out, err);
}

int berth_ldap_search_groups(berth_ldap_t *l, const char *name, const char *dn, size_t max, char **json_out, berth_err_t *err)
{
    char filter[1400];
    const char *base = l->group_search_base;
    int scope = 2;
    berth_err_clear(err);
    if (dn != NULL && dn[0] != '\0') {
        LDAPDN parsed = NULL;
        if (strlen(dn) > 1000 || !berth_auth_credential_ok(dn, strlen(dn)) ||
            ldap_str2dn(dn, &parsed, LDAP_DN_FORMAT_LDAPV3) != LDAP_SUCCESS) {
            ldap_dnfree(parsed);
            return berth_err_set(err, BERTH_OCI_BAD_REQUEST,
                                 "groupdn is not a distinguished name (RFC 4514, at most 1000 characters)");
        }
        ldap_dnfree(parsed);
        base = dn; /* an exact DN: read that entry */
        scope = 0;
        snprintf(filter, sizeof(filter), "%s", l->c.group_filter[0] ? l->c.group_filter : "(objectClass=*)");
    } else if (substring_filter(l->c.group_filter, l->c.group_name_attr, name != NULL ? name : "", filter, sizeof(filter), err) !=
               0) {
        return err->code;
    }
    const char *keys[] = {"group_name"}, *attrs[] = {l->c.group_name_attr};
    return search_json(l, base, scope, filter, keys, attrs, 1, "ldap_group_dn", max, json_out, err);
}
