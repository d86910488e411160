#include "registry/gateway/sqfs_tree.h"

#include <stdlib.h>
#include <string.h>

struct st_berth_sqfs_tree_t {
    berth_sqfs_node_t *root;
    berth_sqfs_node_t **hash; /* chained on (parent, name) */
    size_t hcap, nnodes;
    size_t bytes, peak, max_bytes;
};

static void account(berth_sqfs_tree_t *t, long delta)
{
    t->bytes = (size_t)((long)t->bytes + delta);
    if (t->bytes > t->peak)
        t->peak = t->bytes;
}

static size_t hkey(const berth_sqfs_node_t *parent, const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)parent;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
    return (size_t)h;
}

static void hash_insert(berth_sqfs_tree_t *t, berth_sqfs_node_t *n)
{
    if (t->nnodes + 1 > t->hcap) { /* grow at load 1 */
        size_t ncap = t->hcap ? t->hcap * 2 : 1024;
        berth_sqfs_node_t **nh = calloc(ncap, sizeof(berth_sqfs_node_t *));
        for (size_t i = 0; i < t->hcap; i++)
            for (berth_sqfs_node_t *x = t->hash[i], *nx; x != NULL; x = nx) {
                nx = x->hnext;
                size_t k = hkey(x->parent, x->name, strlen(x->name)) & (ncap - 1);
                x->hnext = nh[k];
                nh[k] = x;
            }
        account(t, (long)((ncap - t->hcap) * sizeof(berth_sqfs_node_t *)));
        free(t->hash);
        t->hash = nh;
        t->hcap = ncap;
    }
    size_t k = hkey(n->parent, n->name, strlen(n->name)) & (t->hcap - 1);
    n->hnext = t->hash[k];
    t->hash[k] = n;
    t->nnodes++;
}

static berth_sqfs_node_t *hash_find(berth_sqfs_tree_t *t, berth_sqfs_node_t *parent, const char *name, size_t len)
{
    if (t->hcap == 0)
        return NULL;
    for (berth_sqfs_node_t *x = t->hash[hkey(parent, name, len) & (t->hcap - 1)]; x != NULL; x = x->hnext)
        if (x->parent == parent && strncmp(x->name, name, len) == 0 && x->name[len] == '\0')
            return x;
    return NULL;
}

static void hash_remove(berth_sqfs_tree_t *t, berth_sqfs_node_t *n)
{
    berth_sqfs_node_t **p = &t->hash[hkey(n->parent, n->name, strlen(n->name)) & (t->hcap - 1)];
    while (*p != n)
        p = &(*p)->hnext;
    *p = n->hnext;
    t->nnodes--;
}

static void free_xattrs(berth_sqfs_tree_t *t, berth_sqfs_inode_t *ino)
{
    for (size_t i = 0; i < ino->nxattrs; i++) {
        account(t, -(long)(strlen(ino->xattrs[i].key) + 1 + ino->xattrs[i].len));
        free(ino->xattrs[i].key);
        free(ino->xattrs[i].value);
    }
    account(t, -(long)(ino->nxattrs * sizeof(berth_sqfs_xattr_t)));
    free(ino->xattrs);
    ino->xattrs = NULL;
    ino->nxattrs = 0;
}

static void set_meta(berth_sqfs_tree_t *t, berth_sqfs_inode_t *ino, const berth_sqfs_entry_t *e)
{
    ino->perm = e->perm & 07777;
    ino->uid = e->uid;
    ino->gid = e->gid;
    ino->mtime = e->mtime;
    free_xattrs(t, ino);
    if (e->nxattrs > 0) {
        ino->xattrs = calloc(e->nxattrs, sizeof(berth_sqfs_xattr_t));
        for (size_t i = 0; i < e->nxattrs; i++) {
            ino->xattrs[i].key = strdup(e->xattrs[i].key);
            ino->xattrs[i].value = malloc(e->xattrs[i].len ? e->xattrs[i].len : 1);
            memcpy(ino->xattrs[i].value, e->xattrs[i].value, e->xattrs[i].len);
            ino->xattrs[i].len = e->xattrs[i].len;
            account(t, (long)(strlen(e->xattrs[i].key) + 1 + e->xattrs[i].len));
        }
        ino->nxattrs = e->nxattrs;
        account(t, (long)(e->nxattrs * sizeof(berth_sqfs_xattr_t)));
    }
}

static berth_sqfs_inode_t *inode_new(berth_sqfs_tree_t *t, berth_sqfs_type_t type)
{
    berth_sqfs_inode_t *ino = calloc(1, sizeof(*ino));
    ino->type = type;
    ino->layer = -1;
    ino->ordinal = -1;
    account(t, sizeof(*ino));
    return ino;
}

static void inode_unref(berth_sqfs_tree_t *t, berth_sqfs_inode_t *ino)
{
    if (--ino->refs > 0)
        return;
    free_xattrs(t, ino);
    if (ino->target != NULL) {
        account(t, -(long)(strlen(ino->target) + 1));
        free(ino->target);
    }
    account(t, -(long)sizeof(*ino));
    free(ino->sq);
    free(ino);
}

static berth_sqfs_node_t *node_alloc(berth_sqfs_tree_t *t, const char *name, size_t len, berth_sqfs_inode_t *ino, int layer)
{
    berth_sqfs_node_t *n = calloc(1, sizeof(*n));
    n->name = strndup(name, len);
    n->inode = ino;
    n->layer = layer;
    ino->refs++;
    account(t, (long)(sizeof(*n) + len + 1));
    return n;
}

/* A new name in `parent` (never NULL: only the root has none, made by berth_sqfs_tree_new) */
static void node_add(berth_sqfs_tree_t *t, berth_sqfs_node_t *parent, berth_sqfs_node_t *n)
{
    n->parent = parent;
    n->next = parent->child;
    if (parent->child != NULL)
        parent->child->prev = n;
    parent->child = n;
    hash_insert(t, n);
}

static berth_sqfs_node_t *node_new(berth_sqfs_tree_t *t, berth_sqfs_node_t *parent, const char *name, size_t len,
                                   berth_sqfs_inode_t *ino, int layer)
{
    berth_sqfs_node_t *n = node_alloc(t, name, len, ino, layer);
    node_add(t, parent, n);
    return n;
}

static void node_free(berth_sqfs_tree_t *t, berth_sqfs_node_t *n)
{
    account(t, -(long)(sizeof(*n) + strlen(n->name) + 1));
    inode_unref(t, n->inode);
    free(n->name);
    free(n);
}

/* Everything below `n`, which stays */
static void free_below(berth_sqfs_tree_t *t, berth_sqfs_node_t *n)
{
    berth_sqfs_node_t *c = n->child, *next;
    n->child = NULL;
    for (; c != NULL; c = next) {
        next = c->next;
        hash_remove(t, c);
        free_below(t, c);
        node_free(t, c);
    }
}

/* Remove a node (not the root) and everything below it */
static void node_remove(berth_sqfs_tree_t *t, berth_sqfs_node_t *n)
{
    free_below(t, n);
    hash_remove(t, n);
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        n->parent->child = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    node_free(t, n);
}

/* An opaque directory of layer L hides everything the layers below put under it; what L itself added stays */
static void remove_below(berth_sqfs_tree_t *t, berth_sqfs_node_t *dir, int layer)
{
    berth_sqfs_node_t *c = dir->child;
    while (c != NULL) {
        berth_sqfs_node_t *next = c->next;
        if (c->layer < layer)
            node_remove(t, c);
        else if (c->inode->type == BERTH_SQFS_DIR)
            remove_below(t, c, layer);
        c = next;
    }
}

berth_sqfs_tree_t *berth_sqfs_tree_new(size_t max_bytes)
{
    berth_sqfs_tree_t *t = calloc(1, sizeof(*t));
    t->max_bytes = max_bytes;
    berth_sqfs_inode_t *ino = inode_new(t, BERTH_SQFS_DIR);
    ino->perm = 0755;
    t->root = node_alloc(t, "", 0, ino, -1);
    return t;
}

void berth_sqfs_tree_free(berth_sqfs_tree_t *t)
{
    if (t == NULL)
        return;
    free_below(t, t->root);
    node_free(t, t->root);
    free(t->hash);
    free(t);
}

berth_sqfs_node_t *berth_sqfs_tree_root(berth_sqfs_tree_t *t)
{
    return t->root;
}

size_t berth_sqfs_tree_bytes(const berth_sqfs_tree_t *t, size_t *peak)
{
    if (peak != NULL)
        *peak = t->peak;
    return t->bytes;
}

/* Next component of `*p`: skips "/" and "." components; *len 0 at the end */
static const char *next_component(const char **p, size_t *len)
{
    for (;;) {
        while (**p == '/')
            (*p)++;
        const char *s = *p;
        while (**p != '\0' && **p != '/')
            (*p)++;
        *len = (size_t)(*p - s);
        if (!(*len == 1 && s[0] == '.'))
            return s;
    }
}

/*
 * Walk to the parent directory of `path`'s last component, creating missing directories when `create`.
 * `name` and `len` receive the last component (len 0: the path names the root).
 */
static int walk(berth_sqfs_tree_t *t, const char *path, int create, int layer, berth_sqfs_node_t **dir_out, const char **name,
                size_t *len, berth_err_t *err)
{
    berth_sqfs_node_t *dir = t->root;
    const char *p = path;
    size_t l;
    const char *c = next_component(&p, &l);
    while (l > 0) {
        if (l == 2 && c[0] == '.' && c[1] == '.')
            return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer entry \"%.200s\" leaves the root", path);
        const char *save = p;
        size_t nl;
        const char *nc = next_component(&p, &nl);
        if (nl == 0) { /* c is the last component */
            *dir_out = dir;
            *name = c;
            *len = l;
            return 0;
        }
        berth_sqfs_node_t *sub = hash_find(t, dir, c, l);
        if (sub == NULL) {
            if (!create) {
                *dir_out = NULL;
                return 0;
            }
            berth_sqfs_inode_t *ino = inode_new(t, BERTH_SQFS_DIR);
            ino->perm = 0755;
            sub = node_new(t, dir, c, l, ino, layer);
        } else if (sub->inode->type != BERTH_SQFS_DIR) {
            if (!create) {
                *dir_out = NULL;
                return 0;
            }
            return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer entry \"%.200s\" passes through a non-directory", path);
        }
        dir = sub;
        c = nc;
        l = nl;
        (void)save;
    }
    *dir_out = dir;
    *name = NULL;
    *len = 0;
    return 0;
}

berth_sqfs_node_t *berth_sqfs_tree_lookup(berth_sqfs_tree_t *t, const char *path)
{
    berth_sqfs_node_t *dir;
    const char *name;
    size_t len;
    if (walk(t, path, 0, 0, &dir, &name, &len, NULL) != 0 || dir == NULL)
        return NULL;
    return len == 0 ? dir : hash_find(t, dir, name, len);
}

int berth_sqfs_tree_apply(berth_sqfs_tree_t *t, int layer, long ordinal, const berth_sqfs_entry_t *e, int keep_devices,
                          berth_err_t *err)
{
    if ((e->type == BERTH_SQFS_CHR || e->type == BERTH_SQFS_BLK) && !keep_devices)
        return 0;
    if (e->type == BERTH_SQFS_SOCK) /* a socket in a tar is meaningless: nothing listens on it */
        return 0;
    berth_sqfs_node_t *dir;
    const char *name;
    size_t len;
    int rc = walk(t, e->path, 1, layer, &dir, &name, &len, err);
    if (rc != 0)
        return rc;
    if (len == 0) { /* the root ("." or "/"): its's own metadata */
        if (e->type == BERTH_SQFS_DIR)
            set_meta(t, t->root->inode, e);
        return 0;
    }
    if (len >= 4 && strncmp(name, ".wh.", 4) == 0) {
        if (len == 12 && strncmp(name, ".wh..wh..opq", 12) == 0)
            remove_below(t, dir, layer);
        else if (len > 8 && strncmp(name, ".wh..wh.", 8) == 0)
            ; /* aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): not content */
        else {
            berth_sqfs_node_t *gone = hash_find(t, dir, name + 4, len - 4);
            if (gone != NULL)
                node_remove(t, gone);
        }
        return 0;
    }
    berth_sqfs_inode_t *ino = NULL;
    if (e->type == BERTH_SQFS_HARDLINK) {
        berth_sqfs_node_t *target = e->target != NULL ? berth_sqfs_tree_lookup(t, e->target) : NULL;
        if (target == NULL || target->inode->type == BERTH_SQFS_DIR)
            return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "hard link \"%.100s\" names no file (\"%.100s\")", e->path,
                                 e->target != NULL ? e->target : "");
        ino = target->inode;
    }
    berth_sqfs_node_t *old = hash_find(t, dir, name, len);
    if (old != NULL) {
        if (e->type == BERTH_SQFS_DIR && old->inode->type == BERTH_SQFS_DIR) { /* keeps its contents */
            set_meta(t, old->inode, e);
            old->layer = layer;
            return 0;
        }
        if (ino != NULL && old->inode == ino)
            return 0;
        if (ino != NULL)
            ino->refs++; /* the target may be `old` itself under another name: keep it alive across the removal */
        node_remove(t, old);
        if (ino != NULL)
            ino->refs--;
    }
    if (ino == NULL) {
        ino = inode_new(t, e->type);
        set_meta(t, ino, e);
        if (e->type == BERTH_SQFS_REG) {
            ino->size = e->size;
            ino->layer = layer;
            ino->ordinal = ordinal;
        } else if (e->type == BERTH_SQFS_SYMLINK) {
            ino->target = strdup(e->target != NULL ? e->target : "");
            account(t, (long)(strlen(ino->target) + 1));
        } else if (e->type == BERTH_SQFS_CHR || e->type == BERTH_SQFS_BLK) {
            ino->rdev = e->rdev;
        }
    }
    node_add(t, dir, node_alloc(t, name, len, ino, layer));
    if (t->max_bytes > 0 && t->bytes > t->max_bytes)
        return berth_err_set(err, BERTH_OCI_MANIFEST_TOO_BIG, "the image's file tree needs more than %zu bytes of memory",
                             t->max_bytes);
    return 0;
}

static void collect(berth_sqfs_node_t *n, berth_sqfs_inode_t ***v, size_t *cnt, size_t *cap)
{
    for (berth_sqfs_node_t *c = n->child; c != NULL; c = c->next) {
        if (c->inode->type == BERTH_SQFS_DIR) {
            collect(c, v, cnt, cap);
            continue;
        }
        if (c->inode->type != BERTH_SQFS_REG || c->inode->ino == UINT32_MAX)
            continue;
        c->inode->ino = UINT32_MAX; /* seen (hard links): the writer numbers inodes afterwards */
        if (*cnt == *cap) {
            *cap = *cap ? *cap * 2 : 256;
            *v = realloc(*v, *cap * sizeof(berth_sqfs_inode_t *));
        }
        (*v)[(*cnt)++] = c->inode;
    }
}

static int by_position(const void *a, const void *b)
{
    const berth_sqfs_inode_t *x = *(berth_sqfs_inode_t *const *)a, *y = *(berth_sqfs_inode_t *const *)b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal;
}

int berth_sqfs_tree_files(berth_sqfs_tree_t *t, berth_sqfs_inode_t ***out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    collect(t->root, out, n, &cap);
    for (size_t i = 0; i < *n; i++)
        (*out)[i]->ino = 0;
    if (*n > 0)
        qsort(*out, *n, sizeof(berth_sqfs_inode_t *), by_position);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(berth_sqfs_node_t *const *)a)->name, (*(berth_sqfs_node_t *const *)b)->name);
}

int berth_sqfs_tree_children(const berth_sqfs_node_t *dir, berth_sqfs_node_t ***out, size_t *n)
{
    size_t cnt = 0;
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next)
        cnt++;
    *out = malloc((cnt ? cnt : 1) * sizeof(berth_sqfs_node_t *));
    *n = 0;
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next)
        (*out)[(*n)++] = c;
    qsort(*out, *n, sizeof(berth_sqfs_node_t *), by_name);
    return 0;
}
