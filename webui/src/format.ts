// Pure formatting helpers (unit-tested in test/format.test.ts): sizes, times, digests.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** 1536 -> "1.5 KiB"; binary units because layer sizes are compared with `du` and quotas. */
export function formatBytes(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n) || n < 0) return "—";
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ${UNITS[i]}`;
}

/** "sha256:0123456789abcdef…" -> "sha256:0123456789ab" (12 hex digits, like docker's short ids). */
export function shortDigest(d: string | null | undefined): string {
  if (!d) return "";
  const i = d.indexOf(":");
  return i < 0 ? d.slice(0, 12) : d.slice(0, i + 13);
}

/** An absolute UTC time for titles and tables; stable across locales so tests and screenshots agree. */
export function formatTime(t: string | number | null | undefined): string {
  if (t == null || t === "") return "—";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return "—";
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

/** "3 min ago", "in 2 d": coarse, for lists; `now` is injectable for tests. */
export function formatAgo(t: string | number | null | undefined, now: number = Date.now()): string {
  if (t == null || t === "") return "never";
  const ms = typeof t === "number" ? t * 1000 : new Date(t).getTime();
  if (Number.isNaN(ms) || ms <= 0) return "never";
  const s = Math.round((now - ms) / 1000);
  const a = Math.abs(s);
  const [n, u] =
    a < 60 ? [a, "s"] : a < 3600 ? [Math.floor(a / 60), "min"] : a < 86400 ? [Math.floor(a / 3600), "h"] : [Math.floor(a / 86400), "d"];
  if (a < 5) return "just now";
  return s >= 0 ? `${n} ${u} ago` : `in ${n} ${u}`;
}

/**
 * When a robot with `days` of duration (-1: never) expires: durations count from its creation, as in Harbor, so
 * the preview in the edit dialog is what the server will store. `now` is injectable for tests.
 */
export function robotExpiry(created: string, days: number, now: number = Date.now()): { text: string; past: boolean } {
  if (days === -1) return { text: "never", past: false };
  const start = new Date(created).getTime();
  if (!Number.isInteger(days) || days < 1 || Number.isNaN(start)) return { text: "—", past: false };
  const at = start + days * 86400 * 1000;
  return { text: formatTime(at / 1000), past: at <= now };
}

/** Bytes per second as a rate. */
export function formatRate(bytes: number, seconds: number): string {
  if (!(seconds > 0)) return "—";
  return `${formatBytes(Math.round(bytes / seconds))}/s`;
}

/** Harbor role ids -> names, as the API and its documents spell them. */
export const ROLES: Record<number, string> = {
  1: "Project admin",
  4: "Maintainer",
  2: "Developer",
  3: "Guest",
  5: "Limited guest",
};

export function roleName(id: number | null | undefined): string {
  return (id != null && ROLES[id]) || "—";
}
