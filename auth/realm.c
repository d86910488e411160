#include "auth/realm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int configured; /* set before any thread answers */

void berth_realm_configure(int external_url_set)
{
    configured = external_url_set;
}

/* a DNS name, IPv4 or [IPv6] with an optional port: nothing that could end the quoted realm or the header */
static int host_ok(const char *h, size_t n)
{
    if (n == 0 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
              strchr(".-:[]_", h[i]) != NULL) ||
            h[i] == '\0')
            return 0;
    return 1;
}

void berth_realm_for_client(berth_resp_t *resp, const char *proto, size_t proto_len, const char *host, size_t host_len)
{
    static const char lead[] = "Bearer realm=\"", tail[] = "/service/token\"";
    if (resp->status != 401)
        return;
    size_t i = 0;
    while (i < resp->nhdrs && strcmp(resp->hdrs[i].name, "www-authenticate") != 0)
        i++;
    if (i == resp->nhdrs || strncmp(resp->hdrs[i].value, lead, sizeof(lead) - 1) != 0)
        return;
    const char *url = resp->hdrs[i].value + sizeof(lead) - 1, *rest = strstr(url, tail);
    if (rest == NULL)
        return;
    int https = proto != NULL && proto_len == 5 && strncasecmp(proto, "https", 5) == 0;
    int downgrade = https && strncasecmp(url, "http://", 7) == 0;
    if ((configured && !downgrade) || host == NULL || !host_ok(host, host_len))
        return;
    size_t n = sizeof(lead) + 8 + host_len + strlen(rest);
    char *v = malloc(n);
    snprintf(v, n, "%s%s://%.*s%s", lead, https ? "https" : "http", (int)host_len, host, rest);
    free(resp->hdrs[i].value);
    resp->hdrs[i].value = v;
}
