#include "registry/http/upload_server.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/realm.h"
#include "core/log.h"
#include "registry/http/access_log.h"
#include "registry/http/edge_trust.h"
#include "registry/http/limits.h"
#include "registry/http/metrics.h"
#include "registry/service/upload.h"

struct st_berth_upload_server_t {
    struct MHD_Daemon *daemon;
    berth_registry_t *reg;
};

/* Per-request state (MHD's con_cls). */
typedef struct {
    berth_upload_t *upload;
    berth_route_t route;
    uint64_t bytes_in;
    struct timespec start;
    int answered;
} conn_state_t;

/* A header only the edge may set (edge_trust.h), or NULL when absent or not from the edge */
static const char *edge_header(struct MHD_Connection *conn, const char *name)
{
    const char *t = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, BERTH_EDGE_TRUST_HEADER);
    return berth_edge_trusted(t, t != NULL ? strlen(t) : 0) ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name) : NULL;
}

static const char *edge_real_ip(struct MHD_Connection *conn)
{
    return edge_header(conn, "X-Real-IP");
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, conn_state_t *st, const char *method, const char *url,
                                 berth_resp_t *resp)
{
    if (resp->status == 401) {
        const char *proto = edge_header(conn, "X-Forwarded-Proto");
        const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        berth_realm_for_client(resp, proto, proto != NULL ? strlen(proto) : 0, host, host != NULL ? strlen(host) : 0);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(resp->len, resp->body != NULL ? resp->body : "", MHD_RESPMEM_MUST_COPY);
    for (size_t i = 0; i < resp->nhdrs; i++)
        MHD_add_response_header(r, resp->hdrs[i].name, resp->hdrs[i].value);
    if (resp->content_type != NULL)
        MHD_add_response_header(r, "content-type", resp->content_type);
    MHD_add_response_header(r, "docker-distribution-api-version", "registry/2.0");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - st->start.tv_sec) * 1e3 + (double)(now.tv_nsec - st->start.tv_nsec) / 1e6;
    const char *remote = edge_real_ip(conn);
    berth_metrics_request(BERTH_ROUTE_UPLOAD, method, resp->status, st->bytes_in, resp->len);
    berth_access_log(remote, method, url, resp->status, st->bytes_in, resp->len, ms, "upload");
    berth_resp_dispose(resp);
    st->answered = 1;
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    berth_upload_server_t *s = cls;
    conn_state_t *st = *con_cls;
    berth_resp_t resp;

    if (st == NULL) { /* headers only: decide before reading any body byte */
        st = calloc(1, sizeof(*st));
        *con_cls = st;
        clock_gettime(CLOCK_MONOTONIC, &st->start);
        berth_err_t err;
        berth_err_clear(&err);
        int rc = berth_route_parse(&st->route, url, strlen(url), &err);
        if (rc != 0 || st->route.kind != BERTH_ROUTE_UPLOAD || berth_route_select(&st->route, method, &err) != 0) {
            if (rc == BERTH_ENOTFOUND || (rc == 0 && st->route.kind != BERTH_ROUTE_UPLOAD))
                berth_err_set(&err, BERTH_OCI_NOT_FOUND, NULL);
            berth_resp_init(&resp);
            berth_resp_error(&resp, &err);
            return send_resp(conn, st, method, url, &resp);
        }
        /* the raw query: MHD parsed it into arguments, but we decode it ourselves in one place */
        char query[2048] = "";
        size_t qlen = 0;
        const char *keys[] = {"digest", "mount", "from"};
        for (size_t i = 0; i < 3; i++) {
            const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, keys[i]);
            if (v != NULL)
                qlen += (size_t)snprintf(query + qlen, sizeof(query) - qlen, "%s%s=%s", qlen ? "&" : "", keys[i], v);
            if (qlen >= sizeof(query))
                qlen = sizeof(query) - 1;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        berth_upload_req_t rq = {
            .method = method,
            .route = &st->route,
            .query = query,
            .query_len = qlen,
            .content_range = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Range"),
            .content_length = cl != NULL ? strtoll(cl, NULL, 10) : -1,
            .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
            .content_encoding = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING),
            .remote = edge_real_ip(conn),
        };
        rq.body = rq.content_length > 0 ||
                  (rq.content_length < 0 &&
                   MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL);
        /* a client that asked to continue waits for the answer before it sends a byte: it gets a refusal at once */
        if (edge_header(conn, "X-Berth-Expect") != NULL ||
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL)
            rq.body = 0;
        st->upload = berth_upload_begin(s->reg, &rq, &resp);
        if (st->upload == NULL)
            return send_resp(conn, st, method, url, &resp); /* MHD then skips the body */
        return MHD_YES;
    }
    if (st->answered) { /* the answer is queued; discard the rest */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        berth_upload_write(st->upload, upload_data, *upload_data_size);
        st->bytes_in += *upload_data_size;
        *upload_data_size = 0;
        return MHD_YES;
    }
    berth_upload_finish(st->upload, &resp);
    return send_resp(conn, st, method, url, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    conn_state_t *st = *con_cls;
    if (st == NULL)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && st->upload != NULL)
        berth_log_info("upload %s aborted after %llu bytes (code %d)", st->route.name, (unsigned long long)st->bytes_in, (int)toe);
    berth_upload_free(st->upload);
    free(st);
    *con_cls = NULL;
}

/* Keep URLs raw: berth_route_parse refuses percent-encoding itself, so "%2e%2e" can never become "..". */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    return strlen(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    berth_log_debug("libmicrohttpd: %s", line);
}

int berth_upload_server_start(berth_upload_server_t **out, berth_registry_t *reg, unsigned max_connections, unsigned idle_timeout,
                              int fd)
{
    berth_upload_server_t *s = calloc(1, sizeof(*s));
    s->reg = reg;
    /* the edge cuts a stalled body after idle_timeout (client_body_timeout) and closes its idle connections to us
     * by then too (keepalive_timeout); our own timeout is the backstop, a little later so the edge acts first */
    s->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                 on_request, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                 (size_t)(1u << 20), MHD_OPTION_CONNECTION_LIMIT, max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                                 idle_timeout + 5, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_UNESCAPE_CALLBACK,
                                 no_unescape, NULL, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_END);
    if (s->daemon == NULL) { /* libmicrohttpd may have closed fd already: leave it (berthd is stopping) */
        free(s);
        return BERTH_ERROR;
    }
    *out = s;
    return 0;
}

void berth_upload_server_stop(berth_upload_server_t *s)
{
    if (s == NULL)
        return;
    MHD_stop_daemon(s->daemon); /* closes the listening socket */
    free(s);
}
