// A project's tag policies: immutable tag rules (/projects/{p}/immutabletagrules) and the retention policy
// (/retentions, found through the project's metadata retention_id) with its dry runs and executions.
import { useState } from "preact/hooks";
import { call, get, list, send } from "../api";
import { CRON_PRESETS, cronProblem, describeCron } from "../cron";
import { formatTime, shortDigest } from "../format";
import type { Perms } from "../perms";
import { listUrl } from "../query";
import { Dialog } from "../ui/dialog";
import { ErrorBox, FormButtons, FormError, Loading, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";
import type { Project } from "./projects";

export interface Selector {
  kind: string;
  decoration: string;
  pattern: string;
  extras?: string;
}

interface Rule {
  id: number;
  disabled: boolean;
  template?: string;
  params?: Record<string, number>;
  scope_selectors: { repository: Selector[] };
  tag_selectors: Selector[];
}

/** "repositories matching **" — how a selector reads in a list */
export function describeSelector(s: Selector | undefined, what: string): string {
  if (!s) return `any ${what}`;
  const verb = s.decoration === "repoExcludes" || s.decoration === "excludes" ? "excluding" : "matching";
  return `${what} ${verb} ${s.pattern || "**"}`;
}

function SelectorFields({ id, what, dec, setDec, pattern, setPattern, decorations }: {
  id: string; what: string; dec: string; setDec: (v: string) => void; pattern: string; setPattern: (v: string) => void; decorations: [string, string];
}) {
  return (
    <>
      <label for={`${id}-dec`}>{what}</label>
      <div class="row">
        <select id={`${id}-dec`} aria-label={`${what}: matching or excluding`} value={dec} onChange={(e) => setDec((e.target as HTMLSelectElement).value)}>
          <option value={decorations[0]}>matching</option>
          <option value={decorations[1]}>excluding</option>
        </select>
        <input id={`${id}-pat`} aria-label={`${what} pattern`} placeholder="** (doublestar; {a,b} alternatives)" value={pattern}
          onInput={(e) => setPattern((e.target as HTMLInputElement).value)} />
      </div>
    </>
  );
}

// ---- immutability -------------------------------------------------------------------------------------------

export function ImmutableRules({ project, perms }: { project: Project; perms: Perms }) {
  const [tick, setTick] = useState(0);
  const [open, setOpen] = useState(false);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  const base = `/projects/${encodeURIComponent(project.name)}/immutabletagrules`;
  return (
    <>
      <p class="hint">A tag that an enabled rule matches can be pushed once; it can then never be moved to another digest or deleted — by a push, the API, retention or replication.</p>
      <FormError msg={err} />
      <PagedTable<Rule>
        label="Immutable tag rules"
        reloadKey={tick}
        rowKey={(r) => r.id}
        toolbar={perms.can("immutable-tag", "create") && (
          <button type="button" class="btn primary" onClick={() => setOpen(true)}>Add rule</button>
        )}
        fetch={(s) => list<Rule>(listUrl(base, { page: s.page, pageSize: s.pageSize }))}
        empty="No immutable tag rules: every tag may be moved or deleted."
        columns={[
          { label: "Repositories", render: (r) => describeSelector(r.scope_selectors.repository?.[0], "repositories") },
          { label: "Tags", render: (r) => describeSelector(r.tag_selectors[0], "tags") },
          { label: "Status", render: (r) => <span class={`badge ${r.disabled ? "" : "ok"}`}>{r.disabled ? "Disabled" : "Enabled"}</span> },
          {
            label: "Actions",
            render: (r) => (
              <span class="row-actions">
                {perms.can("immutable-tag", "update") && (
                  <button type="button" class="btn" onClick={() => act(() => send("PUT", `${base}/${r.id}`, { ...r, disabled: !r.disabled }))}>
                    {r.disabled ? "Enable" : "Disable"}
                  </button>
                )}
                {perms.can("immutable-tag", "delete") && (
                  <button type="button" class="btn danger" aria-label={`Delete rule ${r.id}`}
                    onClick={() => confirm("Delete this immutable tag rule?") && act(() => send("DELETE", `${base}/${r.id}`))}>
                    Delete
                  </button>
                )}
              </span>
            ),
          },
        ]}
      />
      <AddImmutableRule base={base} open={open} onClose={() => setOpen(false)} onAdded={() => setTick((t) => t + 1)} />
    </>
  );
}

function AddImmutableRule({ base, open, onClose, onAdded }: { base: string; open: boolean; onClose: () => void; onAdded: () => void }) {
  const [repoDec, setRepoDec] = useState("repoMatches");
  const [repo, setRepo] = useState("**");
  const [tagDec, setTagDec] = useState("matches");
  const [tag, setTag] = useState("");
  const [err, setErr] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr("");
    try {
      await send("POST", base, {
        disabled: false, action: "immutable", template: "immutable_template",
        scope_selectors: { repository: [{ kind: "doublestar", decoration: repoDec, pattern: repo }] },
        tag_selectors: [{ kind: "doublestar", decoration: tagDec, pattern: tag }],
      });
      onAdded();
      onClose();
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <Dialog title="Add immutable tag rule" open={open} onClose={onClose}>
      <form class="form" onSubmit={submit}>
        <SelectorFields id="imm-repo" what="Repositories" dec={repoDec} setDec={setRepoDec} pattern={repo} setPattern={setRepo} decorations={["repoMatches", "repoExcludes"]} />
        <SelectorFields id="imm-tag" what="Tags" dec={tagDec} setDec={setTagDec} pattern={tag} setPattern={setTag} decorations={["matches", "excludes"]} />
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit="Add" />
      </form>
    </Dialog>
  );
}

// ---- retention ----------------------------------------------------------------------------------------------

const TEMPLATES: [string, string, string][] = [
  ["latestPushedK", "retain the most recently pushed", "artifacts"],
  ["latestPulledN", "retain the most recently pulled", "artifacts"],
  ["nDaysSinceLastPush", "retain the artifacts pushed within the last", "days"],
  ["nDaysSinceLastPull", "retain the artifacts pulled within the last", "days"],
  ["always", "retain always", ""],
];

interface Policy {
  id: number;
  algorithm: string;
  rules: Rule[];
  trigger: { kind: string; settings: { cron: string } };
  scope: { level: string; ref: number };
}

interface Execution {
  id: number;
  status: string;
  trigger: string;
  dry_run: boolean;
  start_time: string;
  end_time: string | null;
}

interface Task {
  id: number;
  execution_id: number;
  repository: string;
  status: string;
  total: number;
  retained: number;
  deleted: { repository: string; digest: string; tags: string[] }[];
}

export function describeRule(r: Rule): string {
  const t = TEMPLATES.find(([id]) => id === r.template);
  const n = r.template && r.params ? r.params[r.template] : undefined;
  const what = t ? (t[2] ? `${t[1]} ${n} ${t[2]}` : t[1]) : r.template ?? "?";
  let untagged = "";
  const sel = r.tag_selectors[0];
  if (sel?.extras) {
    try {
      untagged = JSON.parse(sel.extras).untagged ? ", untagged included" : ", untagged excluded";
    } catch {
      untagged = "";
    }
  }
  return `${what} — ${describeSelector(r.scope_selectors.repository?.[0], "repositories")}, ${describeSelector(sel, "tags")}${untagged}`;
}

const statusClass = (s: string) => (s === "Success" ? "ok" : s === "Error" ? "bad" : s === "Stopped" ? "warn" : "");

export function RetentionRules({ project, perms, onChanged }: { project: Project; perms: Perms; onChanged: () => void }) {
  const rid = project.metadata.retention_id;
  const pol = useLoad(rid ? `retention|${rid}` : "retention|none", () => (rid ? get<Policy>(`/retentions/${rid}`) : Promise.resolve(null)));
  const [open, setOpen] = useState(false);
  const [cron, setCron] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const [shown, setShown] = useState<number | null>(null);
  const [shownDry, setShownDry] = useState(false);
  const { err, act } = useAction(() => {
    pol.reload();
    setTick((t) => t + 1);
  });
  if (pol.error) return <ErrorBox error={pol.error} retry={pol.reload} />;
  if (pol.loading && !pol.data) return <Loading />;
  const p = pol.data;
  const canEdit = perms.can("tag-retention", p ? "update" : "create");
  const save = (rules: Rule[], c: string) =>
    p
      ? send("PUT", `/retentions/${p.id}`, { ...p, rules, trigger: { kind: "Schedule", settings: { cron: c } } })
      : send("POST", "/retentions", { algorithm: "or", rules, scope: { level: "project", ref: project.project_id }, trigger: { kind: "Schedule", settings: { cron: c } } }).then(onChanged);
  const rules = p?.rules ?? [];
  const curCron = p?.trigger?.settings?.cron ?? "";
  const cronErr = cron !== null && cron !== "" ? cronProblem(cron) : null;
  const run = (dry: boolean) => act(() => send("POST", `/retentions/${p!.id}/executions`, { dry_run: dry }));
  return (
    <>
      <p class="hint">Artifacts a rule retains stay; in each repository some rule covers, everything else goes (an artifact with an immutable tag always stays). Garbage collection then frees the bytes.</p>
      <FormError msg={err} />
      <section aria-label="Retention rules">
        <div class="toolbar">
          <h2>Rules ({rules.length}/15)</h2>
          {canEdit && rules.length < 15 && <button type="button" class="btn primary" onClick={() => setOpen(true)}>Add rule</button>}
        </div>
        {rules.length === 0 ? (
          <p class="state empty">No retention rules: nothing is ever removed.</p>
        ) : (
          <ul class="rules">
            {rules.map((r, i) => (
              <li>
                <span>{describeRule(r)}</span>
                {canEdit && (
                  <button type="button" class="btn danger" aria-label={`Delete retention rule ${i + 1}`}
                    onClick={() => confirm("Delete this retention rule?") && act(() => save(rules.filter((_, k) => k !== i), curCron))}>
                    Delete
                  </button>
                )}
              </li>
            ))}
          </ul>
        )}
        {p && (
          <div class="row">
            <span>Schedule: {curCron ? describeCron(curCron) : "none (manual runs only)"}</span>
            {canEdit && (
              <form class="row" onSubmit={(e) => {
                e.preventDefault();
                if (cron !== null && !cronErr) act(() => save(rules, cron).then(() => setCron(null)));
              }}>
                <input aria-label="Schedule (cron)" list="ret-cron" size={28} placeholder="0 0 0 * * * (empty: none)" value={cron ?? curCron}
                  onInput={(e) => setCron((e.target as HTMLInputElement).value)} />
                <datalist id="ret-cron">{CRON_PRESETS.map(([c, d]) => <option value={c}>{d}</option>)}</datalist>
                <button type="submit" class="btn" disabled={cron === null || !!cronErr}>Save schedule</button>
              </form>
            )}
          </div>
        )}
        {cronErr && <FormError msg={cronErr} />}
        {p && perms.can("tag-retention", "update") && (
          <div class="row">
            <button type="button" class="btn" onClick={() => run(true)} disabled={rules.length === 0}>Dry run</button>
            <button type="button" class="btn primary" onClick={() => confirm("Run retention now? Artifacts no rule retains are deleted.") && run(false)} disabled={rules.length === 0}>
              Run now
            </button>
          </div>
        )}
      </section>
      {p && (
        <section aria-label="Retention runs">
          <h2>Runs</h2>
          <PagedTable<Execution>
            label="Retention runs"
            reloadKey={tick}
            rowKey={(e) => e.id}
            toolbar={<button type="button" class="btn" onClick={() => setTick((t) => t + 1)}>Refresh</button>}
            fetch={(s) => list<Execution>(listUrl(`/retentions/${p.id}/executions`, { page: s.page, pageSize: s.pageSize }))}
            empty="No runs yet."
            columns={[
              { label: "Run", render: (e) => `#${e.id}` },
              { label: "Status", render: (e) => <span class={`badge ${statusClass(e.status)}`}>{e.status}</span> },
              { label: "Kind", render: (e) => `${e.dry_run ? "Dry run" : "Real run"}, ${e.trigger === "SCHEDULE" ? "scheduled" : "manual"}` },
              { label: "Started", render: (e) => formatTime(e.start_time) },
              { label: "Ended", render: (e) => (e.end_time ? formatTime(e.end_time) : "—") },
              {
                label: "Details",
                render: (e) => (
                  <span class="row-actions">
                    <button type="button" class="btn" aria-expanded={shown === e.id} onClick={() => {
                        setShown(shown === e.id ? null : e.id);
                        setShownDry(e.dry_run);
                      }}>
                      {shown === e.id ? "Hide" : e.dry_run ? "What would go" : "What went"}
                    </button>
                    {(e.status === "Pending" || e.status === "Running") && perms.can("tag-retention", "update") && (
                      <button type="button" class="btn danger" onClick={() => act(() => send("PATCH", `/retentions/${p.id}/executions/${e.id}`, { action: "stop" }))}>
                        Stop
                      </button>
                    )}
                  </span>
                ),
              },
            ]}
          />
          {shown !== null && <Tasks policy={p.id} execution={shown} dry={shownDry} />}
        </section>
      )}
      <AddRetentionRule open={open} onClose={() => setOpen(false)} onAdd={(r) => act(() => save([...rules, r], curCron))} />
    </>
  );
}

function Tasks({ policy, execution, dry }: { policy: number; execution: number; dry: boolean }) {
  const l = useLoad(`ret-tasks|${policy}|${execution}`, () => list<Task>(`/retentions/${policy}/executions/${execution}/tasks?page_size=100`));
  const [log, setLog] = useState<{ repo: string; text: string } | null>(null);
  if (l.error) return <ErrorBox error={l.error} retry={l.reload} />;
  if (!l.data) return <Loading />;
  return (
    <div class="tasks" aria-label={`Run #${execution} by repository`}>
      <h3>Run #{execution} by repository</h3>
      {l.data.items.length === 0 && <p class="state empty">No repository was in the scope of a rule.</p>}
      {l.data.items.map((t) => (
        <div class="task">
          <p class="row">
            <span>
              <strong>{t.repository}</strong>: {t.total} artifacts, {t.retained} retained, {t.deleted.length} {dry ? "would go" : "deleted"}
            </span>
            <span class={`badge ${statusClass(t.status)}`}>{t.status}</span>
            <button type="button" class="btn" aria-label={`Log of ${t.repository}`}
              onClick={async () => setLog({ repo: t.repository, text: await (await call("GET", `/retentions/${policy}/executions/${execution}/tasks/${t.id}`)).text() })}>
              Log
            </button>
          </p>
          {t.deleted.length > 0 && (
            <ul class="gone">
              {t.deleted.map((d) => (
                <li><code title={d.digest}>{shortDigest(d.digest)}</code> {d.tags.length ? d.tags.join(", ") : <em>untagged</em>}</li>
              ))}
            </ul>
          )}
        </div>
      ))}
      <Dialog title={`Log: ${log?.repo ?? ""}`} open={log !== null} onClose={() => setLog(null)}>
        <pre class="log">{log?.text}</pre>
        <div class="buttons"><button type="button" class="btn" onClick={() => setLog(null)}>Close</button></div>
      </Dialog>
    </div>
  );
}

function AddRetentionRule({ open, onClose, onAdd }: { open: boolean; onClose: () => void; onAdd: (r: Rule) => void }) {
  const [tmpl, setTmpl] = useState("latestPushedK");
  const [n, setN] = useState("10");
  const [repoDec, setRepoDec] = useState("repoMatches");
  const [repo, setRepo] = useState("**");
  const [tagDec, setTagDec] = useState("matches");
  const [tag, setTag] = useState("**");
  const [untagged, setUntagged] = useState(false);
  const unit = TEMPLATES.find(([id]) => id === tmpl)?.[2] ?? "";
  const submit = (e: Event) => {
    e.preventDefault();
    onAdd({
      id: 0, disabled: false, template: tmpl, params: unit ? { [tmpl]: Number(n) } : {},
      scope_selectors: { repository: [{ kind: "doublestar", decoration: repoDec, pattern: repo }] },
      tag_selectors: [{ kind: "doublestar", decoration: tagDec, pattern: tag, extras: JSON.stringify({ untagged }) }],
    } as Rule & { action?: string });
    onClose();
  };
  return (
    <Dialog title="Add retention rule" open={open} onClose={onClose}>
      <form class="form" onSubmit={submit}>
        <label for="ret-tmpl">Keep</label>
        <select id="ret-tmpl" value={tmpl} onChange={(e) => setTmpl((e.target as HTMLSelectElement).value)}>
          {TEMPLATES.map(([id, text, u]) => <option value={id}>{u ? `${text} # ${u}` : text}</option>)}
        </select>
        {unit && (
          <>
            <label for="ret-n">Number of {unit}</label>
            <input id="ret-n" type="number" min="0" required value={n} onInput={(e) => setN((e.target as HTMLInputElement).value)} />
          </>
        )}
        <SelectorFields id="ret-repo" what="Repositories" dec={repoDec} setDec={setRepoDec} pattern={repo} setPattern={setRepo} decorations={["repoMatches", "repoExcludes"]} />
        <SelectorFields id="ret-tag" what="Tags" dec={tagDec} setDec={setTagDec} pattern={tag} setPattern={setTag} decorations={["matches", "excludes"]} />
        <label class="check">
          <input type="checkbox" checked={untagged} onChange={(e) => setUntagged((e.target as HTMLInputElement).checked)} /> Untagged artifacts count as {tagDec === "matches" ? "matching" : "excluded"}
        </label>
        <FormButtons onCancel={onClose} submit="Add" />
      </form>
    </Dialog>
  );
}
