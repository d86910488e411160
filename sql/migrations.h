/* Migrations compiled into the binary by sql/embed.cmake. */
#ifndef BERTH_SQL_MIGRATIONS_H
#define BERTH_SQL_MIGRATIONS_H

#include <stddef.h>

typedef struct st_berth_migration_t {
    int version;
    const char *name;
    const char *sql;
} berth_migration_t;

extern const berth_migration_t berth_migrations[];
extern const size_t berth_migrations_count;

#endif
