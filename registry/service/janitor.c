#include "registry/service/janitor.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/log.h"
#include "registry/service/upload.h"
#include "sql/registry.h"

struct st_berth_janitor_t {
    berth_registry_t *reg;
    long interval_s, max_age_s;
    berth_janitor_hook_fn hook;
    void *hook_arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    pthread_t tid;
};

typedef struct {
    berth_registry_t *reg;
    berth_dbconn_t *c;
    long max_age_s;
    int removed;
} sweep_t;

/* A file older than the age limit with no session row is debris (a crash mid-upload): remove it. */
static void sweep_file(const char *id, double age, void *data)
{
    sweep_t *s = data;
    if (age <= (double)s->max_age_s)
        return;
    if (berth_db_upload_exists(s->c, id, NULL) == 0) {
        berth_store_upload_remove(s->reg->store, id);
        berth_upload_forget(id);
        s->removed++;
    }
}

/* Hash states whose session is gone: purged here above, or by another berthd sharing the database, or ended
 * in a way that never came back for its state. Each holds a digest context until dropped. */
static void forget_gone(berth_dbconn_t *c)
{
    berth_strlist_t ids;
    berth_upload_hash_ids(&ids);
    for (size_t i = 0; i < ids.n; i++)
        if (berth_db_upload_exists(c, ids.items[i], NULL) == 0)
            berth_upload_forget(ids.items[i]);
    berth_strlist_dispose(&ids);
}

int berth_janitor_purge(berth_registry_t *reg, long max_age_s)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL)
        return 0;
    berth_strlist_t expired = {0}, states = {0};
    sweep_t s = {.reg = reg, .c = c, .max_age_s = max_age_s};
    if (berth_db_upload_expire(c, max_age_s, &expired, &states, &err) == 0) {
        for (size_t i = 0; i < expired.n; i++) {
            /* s3: the row's state names the multipart upload to abort */
            berth_store_upload_discard(reg->store, expired.items[i],
                                       i < states.n && states.items[i][0] != '\0' ? states.items[i] : NULL);
            berth_upload_forget(expired.items[i]);
            s.removed++;
        }
        berth_strlist_dispose(&expired);
    }
    berth_strlist_dispose(&states);
    berth_store_upload_each(reg->store, sweep_file, &s);
    forget_gone(c);
    berth_db_release(reg->db, c);
    if (s.removed > 0)
        berth_log_info("janitor: purged %d abandoned upload(s)", s.removed);
    return s.removed;
}

static void *main_loop(void *arg)
{
    berth_janitor_t *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += j->interval_s;
        pthread_cond_timedwait(&j->cv, &j->mu, &until);
        if (j->stop)
            break;
        pthread_mutex_unlock(&j->mu);
        berth_janitor_purge(j->reg, j->max_age_s);
        berth_err_t err;
        berth_dbconn_t *c = j->hook != NULL ? berth_db_acquire(j->reg->db, &err) : NULL;
        if (c != NULL) {
            j->hook(c, j->hook_arg);
            berth_db_release(j->reg->db, c);
        }
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

berth_janitor_t *berth_janitor_start(berth_registry_t *reg, long interval_s, long max_age_s, berth_janitor_hook_fn hook,
                                     void *hook_arg)
{
    berth_janitor_t *j = calloc(1, sizeof(*j));
    j->reg = reg;
    j->hook = hook;
    j->hook_arg = hook_arg;
    j->interval_s = interval_s;
    j->max_age_s = max_age_s;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    if (pthread_create(&j->tid, NULL, main_loop, j) != 0) {
        free(j);
        return NULL;
    }
    return j;
}

void berth_janitor_stop(berth_janitor_t *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->tid, NULL);
    free(j);
}
