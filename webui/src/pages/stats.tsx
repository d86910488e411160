// Statistics: Harbor's counts, and pictures where people would rather look than read — storage per project
// (bars), pushes and pulls per day from the audit log (lines), replication throughput per execution (bars).
// uPlot draws on canvas and is loaded only with this page.
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import { get } from "../api";
import { formatBytes } from "../format";
import { me } from "../session";
import { ErrorBox, Loading, useLoad } from "../ui/states";

interface Stats {
  private_project_count: number;
  public_project_count: number;
  total_project_count: number;
  private_repo_count: number;
  public_repo_count: number;
  total_repo_count: number;
  total_storage_consumption: number;
}

function css(name: string) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

/** One uPlot chart sized to its container, redrawn when the data or the width changes. */
function Chart({ opts, data, label }: { opts: Omit<uPlot.Options, "width" | "height">; data: uPlot.AlignedData; label: string }) {
  const ref = useRef<HTMLDivElement>(null);
  const [scheme, setScheme] = useState(0);
  useEffect(() => {
    // canvas colours are fixed when drawn: redraw when the light/dark preference changes
    const mq = matchMedia("(prefers-color-scheme: dark)");
    const on = () => setScheme((n) => n + 1);
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []);
  useEffect(() => {
    const el = ref.current!;
    const fg = css("--fg"), line = css("--line");
    const axes = (opts.axes ?? [{}, {}]).map((a) => ({ stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 }, ...a }));
    const plot = new uPlot({ ...opts, axes, width: Math.max(200, el.clientWidth), height: 240 } as uPlot.Options, data, el);
    const ro = new ResizeObserver(() => plot.setSize({ width: Math.max(200, el.clientWidth), height: 240 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [data, scheme]);
  return <div class="chart" ref={ref} role="img" aria-label={label} />;
}

const bars = uPlot.paths.bars!({ size: [0.6, 60] });

function StorageChart({ rows }: { rows: { project: string; storage: number }[] }) {
  const xs = rows.map((_, i) => i);
  return (
    <Chart
      label={`Storage per project: ${rows.map((r) => `${r.project} ${formatBytes(r.storage)}`).join(", ")}`}
      data={[xs, rows.map((r) => r.storage)]}
      opts={{
        scales: { x: { time: false, range: [-0.5, Math.max(0.5, rows.length - 0.5)] } },
        legend: { show: false },
        cursor: { show: false },
        series: [{}, { label: "storage", stroke: css("--accent"), fill: css("--accent"), paths: bars, points: { show: false } }],
        axes: [{ splits: () => xs, values: (_u, v) => v.map((i) => rows[i]?.project ?? "") }, { size: 70, values: (_u, v) => v.map((b) => formatBytes(b)) }],
      }}
    />
  );
}

function ActivityChart({ rows }: { rows: { day: string; push: number; pull: number }[] }) {
  return (
    <Chart
      label={`Pushes and pulls per day over ${rows.length} days: ${rows.reduce((n, r) => n + r.push, 0)} pushes, ${rows.reduce((n, r) => n + r.pull, 0)} pulls`}
      data={[rows.map((r) => Date.parse(r.day + "T00:00:00Z") / 1000), rows.map((r) => r.push), rows.map((r) => r.pull)]}
      opts={{
        series: [{}, { label: "pushes", stroke: css("--accent"), width: 2 }, { label: "pulls", stroke: css("--ok"), width: 2, dash: [6, 3] }],
        axes: [{}, { size: 50 }],
      }}
    />
  );
}

function ReplicationChart({ rows }: { rows: { id: number; bytes: number; seconds: number }[] }) {
  const xs = rows.map((_, i) => i);
  return (
    <Chart
      label={`Replication throughput of the last ${rows.length} executions`}
      data={[xs, rows.map((r) => r.bytes / r.seconds)]}
      opts={{
        scales: { x: { time: false, range: [-0.5, Math.max(0.5, rows.length - 0.5)] } },
        legend: { show: false },
        cursor: { show: false },
        series: [{}, { label: "bytes/s", stroke: css("--ok"), fill: css("--ok"), paths: bars, points: { show: false } }],
        axes: [{ splits: () => xs, values: (_u, v) => v.map((i) => (rows[i] ? `#${rows[i].id}` : "")) }, { size: 80, values: (_u, v) => v.map((b) => formatBytes(b) + "/s") }],
      }}
    />
  );
}

export function StatsPage() {
  const s = useLoad("stats", () => get<Stats>("/statistics"));
  const storage = useLoad("stats-storage", () => get<{ project: string; storage: number }[]>("/statistics/storage?limit=15"));
  const activity = useLoad("stats-activity", () => get<{ day: string; push: number; pull: number }[]>("/statistics/activity?days=30"));
  const admin = !!me.value?.sysadmin_flag;
  const repl = useLoad(admin ? "stats-repl" : null, () => get<{ id: number; bytes: number; seconds: number }[]>("/statistics/replication?limit=30"));
  if (s.error) return <ErrorBox error={s.error} retry={s.reload} />;
  if (!s.data) return <Loading />;
  const d = s.data;
  return (
    <>
      <h1>Statistics</h1>
      <div class="tiles">
        <div class="card tile">
          <span class="big">{d.total_project_count}</span> projects
          <span class="muted">
            {d.public_project_count} public · {d.private_project_count} private
          </span>
        </div>
        <div class="card tile">
          <span class="big">{d.total_repo_count}</span> repositories
          <span class="muted">
            {d.public_repo_count} public · {d.private_repo_count} private
          </span>
        </div>
        <div class="card tile">
          <span class="big">{formatBytes(d.total_storage_consumption)}</span> stored
          <span class="muted">each blob counted once</span>
        </div>
      </div>
      <div class="grid2">
        <section class="card" aria-labelledby="st-h">
          <h2 id="st-h">Storage per project</h2>
          {storage.data ? storage.data.length ? <StorageChart rows={storage.data} /> : <p class="muted">No projects.</p> : <Loading />}
        </section>
        <section class="card" aria-labelledby="ac-h">
          <h2 id="ac-h">Pushes and pulls, last 30 days</h2>
          {activity.data ? <ActivityChart rows={activity.data} /> : <Loading />}
        </section>
        {admin && (
          <section class="card" aria-labelledby="rp-h">
            <h2 id="rp-h">Replication throughput per execution</h2>
            {repl.data ? repl.data.length ? <ReplicationChart rows={repl.data} /> : <p class="muted">No replication has run.</p> : <Loading />}
          </section>
        )}
      </div>
    </>
  );
}
