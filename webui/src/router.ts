// Client-side routing on the History API: every page is a URL that survives reload (nginx answers unknown
// paths with index.html). Links are plain <a href>; one document-level listener turns same-origin clicks into
// navigations.
import { signal } from "@preact/signals";

export interface Loc {
  path: string;
  search: string;
}

const read = (): Loc => ({ path: location.pathname, search: location.search });
export const loc = signal<Loc>(typeof location === "undefined" ? { path: "/", search: "" } : read());

export function navigate(url: string, replace = false) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  loc.value = read();
  if (!replace) window.scrollTo(0, 0);
}

export function installRouter() {
  window.addEventListener("popstate", () => (loc.value = read()));
  document.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element).closest?.("a");
    if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin) return;
    if (!a.pathname.startsWith("/") || a.pathname.startsWith("/api/")) return;
    e.preventDefault();
    navigate(a.pathname + a.search);
  });
}

/** Match "/projects/:name/repositories/*repo" against a path; decoded params or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const ps = pattern.split("/").filter(Boolean);
  const xs = path.split("/").filter(Boolean);
  const out: Record<string, string> = {};
  for (let i = 0; i < ps.length; i++) {
    const p = ps[i];
    if (p.startsWith("*")) {
      if (i >= xs.length) return null;
      out[p.slice(1)] = xs.slice(i).map(decodeURIComponent).join("/");
      return out;
    }
    if (i >= xs.length) return null;
    if (p.startsWith(":")) out[p.slice(1)] = decodeURIComponent(xs[i]);
    else if (p !== xs[i]) return null;
  }
  return xs.length === ps.length ? out : null;
}

/** Update the current URL's query (list state) without a new history entry. */
export function setSearch(search: string) {
  navigate(location.pathname + search, true);
}
