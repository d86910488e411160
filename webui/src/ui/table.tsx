// A server-side list: search, sort and paging live in the URL (?q=&sort=&page=&size=) so a list is a deep
// link; each change asks the server for one page (nothing loads everything).
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { Page } from "../api";
import { pageCount, readListState, writeListState } from "../query";
import { loc, setSearch } from "../router";
import { Empty, ErrorBox, Loading, useLoad } from "./states";

export interface Column<T> {
  label: string;
  sort?: string; // the server's sort key; clicking toggles "key" / "-key"
  render: (row: T) => ComponentChildren;
  class?: string;
}

export interface ListState {
  page: number;
  pageSize: number;
  sort: string;
  q: string;
}

export function PagedTable<T>(props: {
  label: string;
  columns: Column<T>[];
  fetch: (s: ListState) => Promise<Page<T>>;
  rowKey: (row: T) => string | number;
  defaultSort?: string;
  searchLabel?: string;
  empty: ComponentChildren;
  reloadKey?: number;
  toolbar?: ComponentChildren;
}) {
  const dflt = { sort: props.defaultSort ?? "", pageSize: 10 };
  const s = readListState(loc.value.search, dflt);
  // the whole query string: pages may keep their own filters next to the list state (?public=, ?op=)
  const key = `${loc.value.path}|${loc.value.search}|${props.reloadKey ?? 0}`;
  const l = useLoad(key, () => props.fetch(s));
  const [q, setQ] = useState(s.q);
  useEffect(() => setQ(s.q), [s.q]);
  useEffect(() => {
    if (q === s.q) return;
    const t = setTimeout(() => setSearch(writeListState({ ...s, q, page: 1 }, dflt)), 250);
    return () => clearTimeout(t);
  }, [q]);
  const go = (patch: Partial<ListState>) => setSearch(writeListState({ ...s, ...patch }, dflt));
  const pages = l.data ? pageCount(l.data.total, s.pageSize) : 1;
  return (
    <div class="list">
      <div class="toolbar">
        {props.searchLabel && (
          <input
            type="search"
            class="search"
            aria-label={props.searchLabel}
            placeholder={props.searchLabel}
            value={q}
            onInput={(e) => setQ((e.target as HTMLInputElement).value)}
          />
        )}
        {props.toolbar}
      </div>
      {l.error ? (
        <ErrorBox error={l.error} retry={l.reload} />
      ) : l.data == null ? (
        <Loading />
      ) : l.data.items.length === 0 ? (
        <Empty>{s.q ? `Nothing matches “${s.q}”.` : props.empty}</Empty>
      ) : (
        <div class="table-wrap">
          <table aria-label={props.label} aria-busy={l.loading}>
            <thead>
              <tr>
                {props.columns.map((c) => {
                  const dir = c.sort && s.sort === c.sort ? "ascending" : c.sort && s.sort === "-" + c.sort ? "descending" : undefined;
                  return (
                    <th scope="col" class={c.class} aria-sort={dir}>
                      {c.sort ? (
                        <button type="button" class="sort" onClick={() => go({ sort: s.sort === c.sort ? "-" + c.sort : c.sort, page: 1 })}>
                          {c.label}
                          <span aria-hidden="true">{dir === "ascending" ? " ▲" : dir === "descending" ? " ▼" : ""}</span>
                        </button>
                      ) : (
                        c.label
                      )}
                    </th>
                  );
                })}
              </tr>
            </thead>
            <tbody>
              {l.data.items.map((row) => (
                <tr key={props.rowKey(row)}>
                  {props.columns.map((c) => (
                    <td class={c.class} data-label={c.label}>
                      {c.render(row)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {l.data && l.data.total > 0 && (
        <nav class="pager" aria-label={`${props.label} pages`}>
          <button type="button" class="btn" disabled={s.page <= 1} onClick={() => go({ page: s.page - 1 })}>
            ‹ Previous
          </button>
          <span>
            Page {Math.min(s.page, pages)} of {pages} · {l.data.total} total
          </span>
          <button type="button" class="btn" disabled={s.page >= pages} onClick={() => go({ page: s.page + 1 })}>
            Next ›
          </button>
          <label>
            Per page{" "}
            <select value={String(s.pageSize)} onChange={(e) => go({ pageSize: Number((e.target as HTMLSelectElement).value), page: 1 })}>
              {[10, 25, 50, 100].map((n) => (
                <option value={String(n)}>{n}</option>
              ))}
            </select>
          </label>
        </nav>
      )}
    </div>
  );
}
