/* Harbor's paged, sortable lists as SQL fragments: shared by sql/api.c and sql/replication.c. */
#ifndef BERTH_SQL_PAGE_H
#define BERTH_SQL_PAGE_H

/* ORDER BY for Harbor's sort=key / sort=-key: `sp` is the (validated) parameter; NULLs sort last either way */
#define SORT_BY(sp, key, col)                                                                                                      \
    "CASE WHEN " sp "::text = '" key "' THEN " col " END, CASE WHEN " sp "::text = '-" key "' THEN " col " END DESC NULLS LAST, "

/* One page of `row` over the CTE f, ordered by `order`, plus the total; $lim and $off are the last two. */
#define PAGE(row, alias, order, lim, off)                                                                                          \
    "SELECT coalesce((SELECT json_agg(" row " ORDER BY " order ") FROM (SELECT * FROM f ORDER BY " order " LIMIT " lim             \
    "::bigint OFFSET " off "::bigint) " alias "), '[]')::text, (SELECT count(*) FROM f)"

#endif
