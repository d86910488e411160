// Storage quotas: the bar every project page shows (usage against its limit, from the summary) and the system
// admin's list of every project's quota with its limit editor (/admin/quotas). Harbor's /quotas API.
import { useState } from "preact/hooks";
import { get, list, send } from "../api";
import { formatBytes, formatTime } from "../format";
import { listUrl } from "../query";
import { LIMIT_UNITS, type LimitUnit, type Quota, parseLimit, quotaLevel, quotaPercent, quotaText, splitLimit } from "../quota";
import { Dialog } from "../ui/dialog";
import { FormError, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";

export interface Summary {
  quota: { id?: number; hard: { storage: number }; used: { storage: number } };
}

/** Usage against the limit: a bar (none when unlimited) and the figures. */
export function QuotaBar({ used, hard, label }: { used: number; hard: number; label: string }) {
  const p = quotaPercent(used, hard);
  const level = quotaLevel(used, hard);
  return (
    <span class={`quota ${level}`}>
      {p != null && (
        <span class="quota-bar" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.min(100, Math.round(p))}>
          <span style={{ width: `${Math.min(100, p)}%` }} />
        </span>
      )}
      <span class="quota-text">{quotaText(used, hard)}</span>
    </span>
  );
}

/** The project's storage quota, read from its summary (members can read it; only system admins change it). */
export function ProjectQuota({ project, compact }: { project: string; compact?: boolean }) {
  const s = useLoad(`summary|${project}`, () => get<Summary>(`/projects/${encodeURIComponent(project)}/summary`));
  if (!s.data) return <>{s.error ? "—" : "…"}</>;
  const q = s.data.quota;
  return <QuotaBar used={q.used.storage} hard={q.hard.storage} label={compact ? `Storage of ${project}` : "Storage quota"} />;
}

export function QuotasSection() {
  const [tick, setTick] = useState(0);
  const [edit, setEdit] = useState<Quota | null>(null);
  return (
    <>
      <p class="muted">
        Storage counts each blob the project's artifacts use (layers, configs) and the manifests themselves, once per project however
        many repositories share them. A push that would go over the limit is refused.
      </p>
      <PagedTable<Quota>
        label="Project quotas"
        reloadKey={tick}
        rowKey={(q) => q.id}
        defaultSort="-used.storage"
        fetch={(s) => list<Quota>(listUrl("/quotas", { page: s.page, pageSize: s.pageSize, sort: s.sort }))}
        empty="No projects yet."
        columns={[
          { label: "Project", render: (q) => <a href={`/projects/${encodeURIComponent(q.ref.name)}`}>{q.ref.name}</a> },
          { label: "Owner", render: (q) => q.ref.owner_name || "—" },
          { label: "Storage used", sort: "used.storage", render: (q) => <QuotaBar used={q.used.storage} hard={q.hard.storage} label={`Storage of ${q.ref.name}`} /> },
          { label: "Limit", sort: "hard.storage", render: (q) => (q.hard.storage < 0 ? "unlimited" : formatBytes(q.hard.storage)) },
          { label: "Changed", sort: "update_time", render: (q) => formatTime(q.update_time) },
          {
            label: "Actions",
            render: (q) => (
              <button type="button" class="btn" aria-label={`Edit the quota of ${q.ref.name}`} onClick={() => setEdit(q)}>
                Edit
              </button>
            ),
          },
        ]}
      />
      {edit && (
        <QuotaForm
          quota={edit}
          onClose={() => setEdit(null)}
          onDone={() => {
            setEdit(null);
            setTick((t) => t + 1);
          }}
        />
      )}
    </>
  );
}

function QuotaForm({ quota, onClose, onDone }: { quota: Quota; onClose: () => void; onDone: () => void }) {
  const init = splitLimit(quota.hard.storage);
  const [unlimited, setUnlimited] = useState(quota.hard.storage < 0);
  const [value, setValue] = useState(init.value);
  const [unit, setUnit] = useState<LimitUnit>(init.unit);
  const [problem, setProblem] = useState("");
  const { err, act } = useAction(onDone);
  return (
    <Dialog title={`Storage quota of ${quota.ref.name}`} open onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          let storage = -1;
          if (!unlimited) {
            const r = parseLimit(value, unit);
            if ("error" in r) {
              setProblem(r.error);
              return;
            }
            storage = r.bytes;
          }
          setProblem("");
          act(() => send("PUT", `/quotas/${quota.id}`, { hard: { storage } }));
        }}
      >
        <p>
          Used now: <QuotaBar used={quota.used.storage} hard={quota.hard.storage} label="Storage used now" />
        </p>
        <label class="check">
          <input type="checkbox" checked={unlimited} onChange={(e) => setUnlimited((e.target as HTMLInputElement).checked)} /> No limit
        </label>
        {!unlimited && (
          <>
            <label for="quota-value">Storage limit</label>
            <span class="inline">
              <input id="quota-value" inputMode="decimal" required value={value} onInput={(e) => {
                  setValue((e.target as HTMLInputElement).value);
                  setProblem("");
                }}
              />
              <select aria-label="Unit" value={unit} onChange={(e) => setUnit((e.target as HTMLSelectElement).value as LimitUnit)}>
                {LIMIT_UNITS.map((u) => (
                  <option value={u}>{u}</option>
                ))}
              </select>
            </span>
            <p class="muted">A limit below the current usage refuses every push that adds storage until usage falls under it.</p>
          </>
        )}
        <FormError msg={problem || err} />
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
