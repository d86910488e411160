/* The Authorization header: "Basic <base64(user:password)>" or "Bearer <token>". */
#ifndef BERTH_AUTH_HEADER_H
#define BERTH_AUTH_HEADER_H

#include <stddef.h>

#define BERTH_AUTH_USER_MAX 255
#define BERTH_AUTH_SECRET_MAX 1024
#define BERTH_AUTH_TOKEN_MAX 8192

typedef enum { BERTH_AUTH_NONE = 0, BERTH_AUTH_BASIC, BERTH_AUTH_BEARER } berth_auth_kind_t;

typedef struct st_berth_auth_header_t {
    berth_auth_kind_t kind;
    char user[BERTH_AUTH_USER_MAX + 1];
    char secret[BERTH_AUTH_SECRET_MAX + 1]; /* Basic password; wiped by berth_auth_header_dispose */
    char token[BERTH_AUTH_TOKEN_MAX + 1];   /* Bearer token */
} berth_auth_header_t;

/**
 * Parse a header value (NULL/empty: BERTH_AUTH_NONE). Scheme names are case-insensitive. A user name may not
 * contain ':'. Returns 0, -1 for a malformed header, or -2 when the Basic user name or password holds a NUL,
 * another control byte or bytes that are not UTF-8 (answer 400: such a credential is never cut short or passed on).
 */
int berth_auth_header_parse(berth_auth_header_t *out, const char *value, size_t len);
/** 1 when `len` bytes of a user name or password hold no control byte (NUL, 0x01-0x1f, 0x7f). */
int berth_auth_credential_ok(const char *s, size_t len);
/** Wipe the secrets. */
void berth_auth_header_dispose(berth_auth_header_t *h);

#endif
