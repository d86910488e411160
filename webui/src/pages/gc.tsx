// Garbage collection (system admins, /admin/gc): the schedule, run now or dry run, and the history with each run's
// progress (polled while one is active), its log and a stop button. Everything is Harbor's /system/gc API.
import { useEffect, useState } from "preact/hooks";
import { get, list, send } from "../api";
import { cronProblem, describeCron } from "../cron";
import { formatBytes, formatTime } from "../format";
import { listUrl } from "../query";
import { Dialog } from "../ui/dialog";
import { FormError, Show, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";

interface Progress {
  phase: number;
  percent: number;
  stopping: boolean;
  manifests_marked: number;
  manifests_deleted: number;
  links_marked: number;
  links_deleted: number;
  blobs_marked: number;
  bytes_marked: number;
  blobs_deleted: number;
  bytes_freed: number;
  orphan_files: number;
  orphan_bytes: number;
}

export interface GcRun {
  id: number;
  job_kind: string;
  job_parameters: string;
  job_status: string;
  creation_time: string;
  start_time: string | null;
  end_time: string | null;
  resumed_from: number | null;
  progress: Progress;
}

interface Schedule {
  schedule: { type: string; cron: string; next_scheduled_time?: string };
  job_parameters: string;
  grace_seconds: number;
}

interface Params {
  delete_untagged: boolean;
  dry_run: boolean;
  workers: number;
}

const TYPES = ["None", "Hourly", "Daily", "Weekly", "Custom"];

function params(s: string): Params {
  try {
    return { delete_untagged: false, dry_run: false, workers: 1, ...JSON.parse(s) };
  } catch {
    return { delete_untagged: false, dry_run: false, workers: 1 };
  }
}

export const active = (r: GcRun) => r.job_status === "Pending" || r.job_status === "Running";
const statusClass = (s: string) => (s === "Success" ? "ok" : s === "Error" ? "bad" : s === "Running" || s === "Pending" ? "warn" : "");

/** What a run did (or, dry, would do), in one line; nothing final while it is pending or running (its counts are
 * partial: a "would free 0 B" there read as the dry run's answer, and a run started on it met 409) */
export function gcSummary(r: GcRun): string {
  const p = r.progress;
  const dry = params(r.job_parameters).dry_run;
  if (active(r)) return r.job_status === "Pending" ? "waiting to start" : dry ? "dry run in progress" : "in progress";
  if (dry)
    return `would free ${formatBytes(p.bytes_marked + p.orphan_bytes)}: ${p.manifests_marked} manifests, ${p.links_marked} links, ${p.blobs_marked} blobs, ${p.orphan_files} orphaned files`;
  return `freed ${formatBytes(p.bytes_freed + p.orphan_bytes)}: ${p.manifests_deleted} manifests, ${p.links_deleted} links, ${p.blobs_deleted} blobs, ${p.orphan_files} orphaned files`;
}

export function GcSection() {
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState(false);
  const [poll, setPoll] = useState(0);
  const [log, setLog] = useState<{ id: number; text: string } | null>(null);
  const [untagged, setUntagged] = useState(false);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  useEffect(() => {
    if (!live) return;
    const t = setInterval(() => setPoll((x) => x + 1), 1500);
    return () => clearInterval(t);
  }, [live]);
  const run = (dry: boolean) =>
    act(() => send("POST", "/system/gc/schedule", { schedule: { type: "Manual" }, parameters: { delete_untagged: untagged, dry_run: dry } }));
  return (
    <>
      <ScheduleCard tick={tick} onSaved={() => setTick((t) => t + 1)} />
      <h2>Run now</h2>
      <div class="toolbar">
        <label class="check">
          <input type="checkbox" checked={untagged} onChange={(e) => setUntagged((e.target as HTMLInputElement).checked)} /> Also delete
          untagged artifacts (never the children of a tagged index or what a kept artifact refers to)
        </label>
        {/* one run at a time (the server answers 409 otherwise): the buttons wait for the active one to end */}
        <button class="btn primary" disabled={live} onClick={() => run(false)}>
          Run garbage collection
        </button>
        <button class="btn" disabled={live} onClick={() => run(true)}>
          Dry run
        </button>
        {live && <span class="hint">a run is in progress</span>}
      </div>
      <FormError msg={err} />
      <h2>History</h2>
      <PagedTable<GcRun>
        label="Garbage collection runs"
        reloadKey={tick * 100000 + poll}
        rowKey={(r) => r.id}
        fetch={async (s) => {
          const r = await list<GcRun>(listUrl("/system/gc", { page: s.page, pageSize: s.pageSize }));
          setLive(r.items.some(active));
          return r;
        }}
        empty="Garbage collection has not run yet."
        columns={[
          { label: "ID", render: (r) => `#${r.id}${r.resumed_from ? ` (resumes #${r.resumed_from})` : ""}` },
          {
            label: "Status",
            render: (r) => <span class={`badge ${statusClass(r.job_status)}`}>{r.progress.stopping ? "Stopping" : r.job_status}</span>,
          },
          {
            label: "Kind",
            render: (r) => {
              const p = params(r.job_parameters);
              return `${r.job_kind === "SCHEDULE" ? "scheduled" : "manual"}${p.dry_run ? ", dry run" : ""}${p.delete_untagged ? ", untagged too" : ""}`;
            },
          },
          {
            label: "Progress",
            render: (r) => (
              <>
                <progress max={100} value={r.progress.percent} aria-label={`Progress of run ${r.id}`} /> {r.progress.percent}%
              </>
            ),
          },
          { label: "Result", render: gcSummary },
          { label: "Started", render: (r) => (r.start_time ? formatTime(r.start_time) : "waiting") },
          { label: "Ended", render: (r) => (r.end_time ? formatTime(r.end_time) : "—") },
          {
            label: "Actions",
            render: (r) => (
              <span class="row-actions">
                <button
                  type="button"
                  class="btn"
                  onClick={async () => {
                    const resp = await fetch(`/api/v2.0/system/gc/${r.id}/log`, { credentials: "same-origin" });
                    setLog({ id: r.id, text: await resp.text() });
                  }}
                >
                  Log
                </button>
                {active(r) && !r.progress.stopping && (
                  <button class="btn danger" type="button" onClick={() => act(() => send("PUT", `/system/gc/${r.id}`))}>
                    Stop
                  </button>
                )}
              </span>
            ),
          },
        ]}
      />
      <Dialog title={`Log of run #${log?.id ?? ""}`} open={log != null} onClose={() => setLog(null)}>
        <pre tabIndex={0} aria-label={`Log of run ${log?.id ?? ""}`}>
          {log?.text}
        </pre>
        <div class="actions">
          <button type="button" class="btn" onClick={() => setLog(null)}>
            Close
          </button>
        </div>
      </Dialog>
    </>
  );
}

function ScheduleCard({ tick, onSaved }: { tick: number; onSaved: () => void }) {
  const s = useLoad(`gc-schedule|${tick}`, () => get<Schedule>("/system/gc/schedule"));
  const [edit, setEdit] = useState(false);
  return (
    <Show l={s}>
      {(d) => {
        const p = params(d.job_parameters);
        return (
          <>
            <h2>Schedule</h2>
            <dl class="kv card">
              <dt>When</dt>
              <dd>
                {d.schedule.type === "None" ? "not scheduled" : d.schedule.type === "Custom" ? describeCron(d.schedule.cron) : d.schedule.type}
                {d.schedule.next_scheduled_time && <> (next: {formatTime(d.schedule.next_scheduled_time)})</>}
              </dd>
              <dt>Parameters</dt>
              <dd>
                {p.delete_untagged ? "untagged artifacts too" : "blobs only"}
                {p.dry_run ? ", dry run" : ""}
              </dd>
              <dt>Grace window</dt>
              <dd>nothing unreferenced for less than {d.grace_seconds} s is deleted (gc.grace_seconds)</dd>
            </dl>
            <button class="btn" onClick={() => setEdit(true)}>
              Edit schedule
            </button>
            {edit && (
              <ScheduleForm
                cur={d}
                onClose={() => setEdit(false)}
                onDone={() => {
                  setEdit(false);
                  onSaved();
                }}
              />
            )}
          </>
        );
      }}
    </Show>
  );
}

function ScheduleForm({ cur, onClose, onDone }: { cur: Schedule; onClose: () => void; onDone: () => void }) {
  const p = params(cur.job_parameters);
  const [f, setF] = useState({ type: cur.schedule.type, cron: cur.schedule.cron, untagged: p.delete_untagged, dry: p.dry_run });
  const cronErr = f.type === "Custom" ? cronProblem(f.cron) : null;
  const { err, act } = useAction(onDone);
  return (
    <Dialog title="Garbage collection schedule" open onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          if (cronErr) return;
          act(() =>
            send("PUT", "/system/gc/schedule", {
              schedule: { type: f.type, cron: f.type === "Custom" ? f.cron : "" },
              parameters: { delete_untagged: f.untagged, dry_run: f.dry, workers: 1 },
            }),
          );
        }}
      >
        <label for="gc-type">Run</label>
        <select id="gc-type" value={f.type} onChange={(e) => setF({ ...f, type: (e.target as HTMLSelectElement).value })}>
          {TYPES.map((t) => (
            <option value={t}>{t === "None" ? "Never (manual only)" : t}</option>
          ))}
        </select>
        {f.type === "Custom" && (
          <>
            <label for="gc-cron">Cron (second minute hour day-of-month month day-of-week)</label>
            <input id="gc-cron" required value={f.cron} onInput={(e) => setF({ ...f, cron: (e.target as HTMLInputElement).value })} />
            {cronErr ? <FormError msg={cronErr} /> : <p class="muted">{describeCron(f.cron)}</p>}
          </>
        )}
        <label class="check">
          <input type="checkbox" checked={f.untagged} onChange={(e) => setF({ ...f, untagged: (e.target as HTMLInputElement).checked })} /> Also
          delete untagged artifacts
        </label>
        <label class="check">
          <input type="checkbox" checked={f.dry} onChange={(e) => setF({ ...f, dry: (e.target as HTMLInputElement).checked })} /> Dry run only
        </label>
        <FormError msg={err} />
        <div class="actions">
          <button type="button" class="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="btn primary">
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}
