// Building /api/v2.0 URLs: Harbor's paging (page, page_size), sort and q= filter syntax (key=value, key=~fuzzy,
// comma-separated). Unit-tested in test/query.test.ts.

export type Filters = Record<string, string | number | boolean | null | undefined>;

/** Harbor's q: {name: "~web", public: true} -> "name=~web,public=true"; empty values are left out. */
export function harborQ(f: Filters): string {
  return Object.entries(f)
    .filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

export interface ListQuery {
  page?: number;
  pageSize?: number;
  sort?: string; // "name", "-update_time"
  q?: Filters;
  extra?: Record<string, string | number | boolean | undefined>;
}

/** "/projects" + {page: 2} -> "/projects?page=2&page_size=10" (keys in a fixed order, values encoded). */
export function listUrl(path: string, lq: ListQuery = {}): string {
  const p = new URLSearchParams();
  p.set("page", String(Math.max(1, Math.floor(lq.page ?? 1))));
  p.set("page_size", String(Math.min(100, Math.max(1, Math.floor(lq.pageSize ?? 10)))));
  if (lq.sort) p.set("sort", lq.sort);
  const q = lq.q ? harborQ(lq.q) : "";
  if (q) p.set("q", q);
  for (const [k, v] of Object.entries(lq.extra ?? {})) if (v !== undefined && v !== "") p.set(k, String(v));
  return `${path}?${p.toString()}`;
}

/** Repository names hold slashes; Harbor wants them double-encoded inside a path segment. */
export function repoSegment(repoInProject: string): string {
  return encodeURIComponent(encodeURIComponent(repoInProject));
}

/** "team/tools/cc" in project "team" -> "tools/cc" (Harbor's API paths name repositories without the project). */
export function repoInProject(project: string, fullName: string): string {
  return fullName.startsWith(project + "/") ? fullName.slice(project.length + 1) : fullName;
}

/** Page count from an X-Total-Count. */
export function pageCount(total: number, pageSize: number): number {
  return Math.max(1, Math.ceil(total / Math.max(1, pageSize)));
}

/** Read list state from a location's search string, with defaults, so every list is a deep link. */
export function readListState(search: string, dflt: { sort?: string; pageSize?: number } = {}) {
  const p = new URLSearchParams(search);
  const n = (k: string, d: number) => {
    const v = Number(p.get(k));
    return Number.isFinite(v) && v >= 1 ? Math.floor(v) : d;
  };
  return { page: n("page", 1), pageSize: Math.min(100, n("size", dflt.pageSize ?? 10)), sort: p.get("sort") ?? dflt.sort ?? "", q: p.get("q") ?? "" };
}

/** The inverse of readListState: defaults are left out so URLs stay short. */
export function writeListState(s: { page: number; pageSize: number; sort: string; q: string }, dflt: { sort?: string; pageSize?: number } = {}): string {
  const p = new URLSearchParams();
  if (s.q) p.set("q", s.q);
  if (s.sort && s.sort !== (dflt.sort ?? "")) p.set("sort", s.sort);
  if (s.page > 1) p.set("page", String(s.page));
  if (s.pageSize !== (dflt.pageSize ?? 10)) p.set("size", String(s.pageSize));
  const str = p.toString();
  return str ? "?" + str : "";
}
