// Replication schedules (unit-tested in test/cron.test.ts): Harbor's six cron fields (seconds first; Berth also
// takes the classic five), checked as berthd checks them so the form says what is wrong before saving, and
// described in words for the policy list.

const FIELDS: { name: string; lo: number; hi: number }[] = [
  { name: "second", lo: 0, hi: 59 },
  { name: "minute", lo: 0, hi: 59 },
  { name: "hour", lo: 0, hi: 23 },
  { name: "day of month", lo: 1, hi: 31 },
  { name: "month", lo: 1, hi: 12 },
  { name: "day of week", lo: 0, hi: 6 },
];

export const CRON_PRESETS: [string, string][] = [
  ["0 0 * * * *", "every hour"],
  ["0 0 0 * * *", "every day at midnight"],
  ["0 0 2 * * 0", "every Sunday at 02:00"],
];

/** The six fields of an expression (five get seconds 0), or null when there are not five or six. */
function fields(expr: string): string[] | null {
  const f = expr.trim().split(/\s+/).filter(Boolean);
  if (f.length === 5) return ["0", ...f];
  return f.length === 6 ? f : null;
}

/** What is wrong with a schedule, or null when berthd will run it. */
export function cronProblem(expr: string): string | null {
  const f = fields(expr);
  if (!f) return "a schedule has six fields (second minute hour day-of-month month day-of-week), or five without seconds";
  for (let i = 0; i < 6; i++) {
    const { name, lo, hi } = FIELDS[i];
    for (const part of f[i].split(",")) {
      const m = /^(\*|\?|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
      if (!m) return `the ${name} field "${f[i]}" is not *, a number or a range (names such as MON are not understood)`;
      if (m[4] !== undefined && Number(m[4]) === 0) return `the ${name} field "${f[i]}" has a step of 0`;
      const a = m[2] !== undefined ? Number(m[2]) : lo, b = m[3] !== undefined ? Number(m[3]) : a;
      if (m[2] !== undefined && (a < lo || b > hi || a > b)) return `the ${name} field "${f[i]}" is outside ${lo}-${hi}`;
    }
  }
  return null;
}

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const two = (s: string) => s.padStart(2, "0");
const any = (s: string) => s === "*" || s === "?";
const num = (s: string) => /^\d+$/.test(s);

/** A schedule in words for the common shapes; the expression itself otherwise. Times are the server's. */
export function describeCron(expr: string): string {
  const f = fields(expr);
  if (!f || cronProblem(expr)) return `invalid schedule "${expr}"`;
  const [s, mi, h, dom, mon, dow] = f;
  if (s !== "0" || !any(mon)) return `cron ${expr.trim()}`;
  if (any(mi) && any(h) && any(dom) && any(dow)) return "every minute";
  if (num(mi) && any(h) && any(dom) && any(dow)) return mi === "0" ? "every hour" : `every hour at minute ${mi}`;
  if (num(mi) && /^\*\/\d+$/.test(h) && any(dom) && any(dow)) return `every ${h.slice(2)} hours at minute ${mi}`;
  if (!num(mi) || !num(h)) return `cron ${expr.trim()}`;
  const at = `${two(h)}:${two(mi)}`;
  if (any(dom) && any(dow)) return `every day at ${at}`;
  if (any(dom) && num(dow)) return `every ${DAYS[Number(dow)]} at ${at}`;
  if (num(dom) && any(dow)) return `on day ${dom} of every month at ${at}`;
  return `cron ${expr.trim()}`;
}
