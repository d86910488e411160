/*
 * LDAP logins next to local users (issue #3). One search per login finds the user and, through the membership
 * attribute (memberOf), every group at once — never one query per group. The password is checked by binding
 * as the user on a fresh connection. Blocking with the configured timeout: every exchange runs on an auth worker
 * (auth/offload.h; elsewhere it fails with BERTH_EUNAVAIL and the request moves), at most `max_concurrent` at once.
 */
#ifndef BERTH_AUTH_LDAP_H
#define BERTH_AUTH_LDAP_H

#include <stddef.h>

#include "core/err.h"

typedef struct st_berth_ldap_conf_t {
    const char *url;             /* one or more space-separated ldap:// or ldaps:// URLs */
    int starttls;                /* upgrade ldap:// with StartTLS */
    const char *search_dn;       /* service account (empty: anonymous search) */
    const char *search_password; /* read from a file by the caller */
    const char *base_dn;
    const char *user_filter; /* e.g. (objectClass=inetOrgPerson); may be empty */
    const char *uid_attr;    /* e.g. uid */
    int scope;               /* 0 base, 1 one level, 2 subtree */
    int timeout;             /* seconds for a whole exchange: connect, binds and search together */
    int max_concurrent;      /* exchanges at once (default 3); more are shed with 503 while the directory is slow */
    int verify_cert;
    const char *ca_file;
    const char *group_base_dn;   /* groups outside it are ignored (empty: all) */
    const char *group_filter;    /* e.g. (objectClass=groupOfNames) */
    const char *group_name_attr; /* e.g. cn */
    const char *membership_attr; /* e.g. memberOf */
    const char *group_admin_dn;  /* members of this group are system admins */
} berth_ldap_conf_t;

typedef struct st_berth_ldap_t berth_ldap_t;

typedef struct st_berth_ldap_user_t {
    char username[256], dn[1024], email[256], realname[256];
    char **groups; /* normalized DNs of the user's groups within group_base_dn */
    size_t ngroups;
    int admin; /* in group_admin_dn */
} berth_ldap_user_t;
void berth_ldap_user_dispose(berth_ldap_user_t *u);

/** Prepare a client (no connection yet). Copies the configuration. */
int berth_ldap_open(berth_ldap_t **out, const berth_ldap_conf_t *conf, berth_err_t *err);
void berth_ldap_close(berth_ldap_t *l);
/**
 * Authenticate: find the user (one search, groups included) and bind as it. 0 with *out, whose username is the
 * directory's spelling of the name (the uid value equal to `username` ignoring case); BERTH_EUNAUTH for an unknown
 * user, an ambiguous name or a wrong/empty password; BERTH_EUNAVAIL when LDAP cannot be reached in time or is busy.
 */
int berth_ldap_login(berth_ldap_t *l, const char *username, const char *password, berth_ldap_user_t *out, berth_err_t *err);
/** Find a user without a password (import, re-checks). BERTH_ENOTFOUND when absent; out->username as for login. */
int berth_ldap_lookup(berth_ldap_t *l, const char *username, berth_ldap_user_t *out, berth_err_t *err);
/** Connect and bind with the service account. */
int berth_ldap_ping(berth_ldap_t *l, berth_err_t *err);
/**
 * Up to `max` users whose uid contains `term` (empty: any) as JSON [{username, realname, email, ldap_dn}] (malloc'd text).
 * A term longer than 256 bytes or holding a control byte is BERTH_EINVAL with a BAD_REQUEST error.
 */
int berth_ldap_search_users(berth_ldap_t *l, const char *term, size_t max, char **json_out, berth_err_t *err);
/**
 * Groups by name substring (empty: any) or exact DN as JSON [{group_name, ldap_group_dn}] (malloc'd text). A DN
 * that does not parse (RFC 4514) or a bad name is BERTH_EINVAL with a BAD_REQUEST error, before LDAP is asked.
 */
int berth_ldap_search_groups(berth_ldap_t *l, const char *name, const char *dn, size_t max, char **json_out, berth_err_t *err);

/** RFC 4515 filter-value escaping (*, (, ), \ and NUL as \2a \28 \29 \5c \00). Returns 0, or -1 if it does not fit. */
int berth_ldap_escape(const char *in, char *out, size_t outsz);
/** A DN in the form Berth compares: lowercase, no spaces around ',' '=' and '+'. */
void berth_ldap_dn_normalize(const char *in, char *out, size_t outsz);

#endif
