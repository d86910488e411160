// Administration (system admins): users, registries, replication policies and executions (live), the system
// audit log, garbage collection (gc.tsx), project quotas (quotas.tsx), LDAP (import users, add groups) and system information. Each section is
// its own URL under /admin/.
import { useEffect, useState } from "preact/hooks";
import { call, get, list, send } from "../api";
import { CRON_PRESETS, cronProblem, describeCron } from "../cron";
import { formatBytes, formatRate, formatTime } from "../format";
import { listUrl } from "../query";
import { loc, match, setSearch } from "../router";
import { me } from "../session";
import { Dialog } from "../ui/dialog";
import { Empty, ErrorBox, Forbidden, FormButtons, FormError, Loading, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";
import { GcSection } from "./gc";
import { QuotasSection } from "./quotas";
import { auditColumns } from "./project";

const SECTIONS = [
  ["users", "Users"],
  ["registries", "Registries"],
  ["replication", "Replication"],
  ["audit", "Audit log"],
  ["gc", "Garbage collection"],
  ["quotas", "Quotas"],
  ["ldap", "LDAP"],
  ["system", "System"],
] as const;

export function AdminPage({ rest }: { rest: string }) {
  if (!me.value?.sysadmin_flag) return <Forbidden />;
  const section = rest.split("/")[0];
  let m: Record<string, string> | null;
  let body;
  if ((m = match("replication/executions/:id", rest))) body = <Execution id={m.id} />;
  else if (section === "users") body = <Users />;
  else if (section === "registries") body = <Registries />;
  else if (section === "replication") body = <Policies />;
  else if (section === "audit") body = <Audit />;
  else if (section === "gc") body = <GcSection />;
  else if (section === "quotas") body = <QuotasSection />;
  else if (section === "ldap") body = <Ldap />;
  else if (section === "system") body = <System />;
  else body = <ErrorBox error={new Error(`No section ${rest}`)} />;
  return (
    <>
      <h1>Administration</h1>
      <nav class="tabs" aria-label="Administration sections">
        {SECTIONS.map(([id, label]) => (
          <a href={`/admin/${id}`} aria-current={section === id ? "page" : undefined}>
            {label}
          </a>
        ))}
      </nav>
      {body}
    </>
  );
}

/* ---- users ---- */
interface UserRow {
  user_id: number;
  username: string;
  email: string;
  realname: string;
  sysadmin_flag: boolean;
  creation_time: string;
  /** berthd's own replication user: the server refuses to change or delete it */
  internal?: boolean;
}

function Users() {
  const [tick, setTick] = useState(0);
  const [open, setOpen] = useState(false);
  const [pwFor, setPwFor] = useState<UserRow | null>(null);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  return (
    <>
      <FormError msg={err} />
      <PagedTable<UserRow>
        label="Users"
        searchLabel="Search users"
        reloadKey={tick}
        rowKey={(u) => u.user_id}
        toolbar={
          <button type="button" class="btn primary" onClick={() => setOpen(true)}>
            New user
          </button>
        }
        fetch={(s) => list<UserRow>(listUrl("/users", { page: s.page, pageSize: s.pageSize, extra: { username: s.q || undefined } }))}
        empty="No users."
        columns={[
          {
            label: "Username",
            render: (u) =>
              u.internal ? (
                <>
                  {u.username} <span class="badge" title="Replication reaches this site as this user; it cannot be changed or deleted.">internal</span>
                </>
              ) : (
                u.username
              ),
          },
          { label: "Email", render: (u) => <span class="wrap">{u.email || "—"}</span> },
          {
            label: "Administrator",
            render: (u) => (
              <label class="check">
                <input
                  type="checkbox"
                  checked={u.sysadmin_flag}
                  disabled={u.username === me.value?.username || u.internal}
                  aria-label={`${u.username} is a system administrator`}
                  onChange={(e) => act(() => send("PUT", `/users/${u.user_id}/sysadmin`, { sysadmin_flag: (e.target as HTMLInputElement).checked }))}
                />
              </label>
            ),
          },
          { label: "Created", render: (u) => formatTime(u.creation_time) },
          {
            label: "Actions",
            render: (u) =>
              u.internal ? (
                <span class="muted">Used by replication</span>
              ) : (
              <span class="row-actions">
                <button type="button" class="btn" onClick={() => setPwFor(u)}>
                  Reset password
                </button>
                {u.username !== me.value?.username && (
                  <button type="button" class="btn danger" onClick={() => confirm(`Delete user ${u.username}?`) && act(() => send("DELETE", `/users/${u.user_id}`))}>
                    Delete
                  </button>
                )}
              </span>
              ),
          },
        ]}
      />
      <NewUser open={open} onClose={() => setOpen(false)} onDone={() => setTick((t) => t + 1)} />
      <ResetPassword user={pwFor} onClose={() => setPwFor(null)} />
    </>
  );
}

function NewUser({ open, onClose, onDone }: { open: boolean; onClose: () => void; onDone: () => void }) {
  const [f, setF] = useState({ username: "", email: "", realname: "", password: "" });
  const { err, act } = useAction(() => {
    onDone();
    onClose();
  });
  const field = (k: keyof typeof f, label: string, type: "text" | "email" | "password" = "text") => (
    <>
      <label for={`nu-${k}`}>{label}</label>
      <input id={`nu-${k}`} type={type as "text"} required={k !== "realname"} value={f[k]} onInput={(e) => setF({ ...f, [k]: (e.target as HTMLInputElement).value })} />
    </>
  );
  return (
    <Dialog title="New user" open={open} onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          act(() => send("POST", "/users", f));
        }}
      >
        {field("username", "Username")}
        {field("email", "Email", "email")}
        {field("realname", "Full name")}
        {field("password", "Password (8+ characters, upper and lower case and a digit)", "password")}
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit="Create" />
      </form>
    </Dialog>
  );
}

function ResetPassword({ user, onClose }: { user: UserRow | null; onClose: () => void }) {
  const [pw, setPw] = useState("");
  const { err, act } = useAction(onClose);
  return (
    <Dialog title={`Reset the password of ${user?.username ?? ""}`} open={user != null} onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          act(() => send("PUT", `/users/${user!.user_id}/password`, { new_password: pw }));
        }}
      >
        <label for="rp-pw">New password</label>
        <input id="rp-pw" type="password" required value={pw} onInput={(e) => setPw((e.target as HTMLInputElement).value)} />
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit="Set password" />
      </form>
    </Dialog>
  );
}

/* ---- registries ---- */
interface Registry {
  id: number;
  name: string;
  type: string;
  url: string;
  insecure: boolean;
  credential: { access_key: string | null };
}

function Registries() {
  const [tick, setTick] = useState(0);
  const [edit, setEdit] = useState<Partial<Registry> | null>(null);
  const [msg, setMsg] = useState("");
  const { err, act } = useAction(() => setTick((t) => t + 1));
  return (
    <>
      <FormError msg={err} />
      {msg && <p role="status">{msg}</p>}
      <PagedTable<Registry>
        label="Registries"
        reloadKey={tick}
        rowKey={(r) => r.id}
        toolbar={
          <button type="button" class="btn primary" onClick={() => setEdit({ type: "berth", insecure: false })}>
            New registry
          </button>
        }
        fetch={(s) => list<Registry>(listUrl("/registries", { page: s.page, pageSize: s.pageSize }))}
        empty="No registries: add the other sites you replicate with."
        columns={[
          { label: "Name", render: (r) => r.name },
          { label: "Type", render: (r) => r.type },
          { label: "URL", render: (r) => <span class="wrap">{r.url}</span> },
          { label: "User", render: (r) => r.credential.access_key || "anonymous" },
          {
            label: "Actions",
            render: (r) => (
              <span class="row-actions">
                <button
                  type="button"
                  class="btn"
                  onClick={() => {
                    setMsg("");
                    act(async () => {
                      await send("POST", "/registries/ping", { id: r.id, type: r.type, url: r.url, insecure: r.insecure });
                      setMsg(`${r.name}: reachable.`);
                    });
                  }}
                >
                  Test
                </button>
                <button type="button" class="btn" onClick={() => setEdit(r)}>
                  Edit
                </button>
                <button type="button" class="btn danger" onClick={() => confirm(`Delete registry ${r.name}?`) && act(() => send("DELETE", `/registries/${r.id}`))}>
                  Delete
                </button>
              </span>
            ),
          },
        ]}
      />
      {edit && <RegistryForm reg={edit} onClose={() => setEdit(null)} onDone={() => setTick((t) => t + 1)} />}
    </>
  );
}

function RegistryForm({ reg, onClose, onDone }: { reg: Partial<Registry>; onClose: () => void; onDone: () => void }) {
  const [f, setF] = useState({ name: reg.name ?? "", type: reg.type ?? "berth", url: reg.url ?? "", key: reg.credential?.access_key ?? "", secret: "", insecure: !!reg.insecure });
  const { err, act } = useAction(() => {
    onDone();
    onClose();
  });
  const [ping, setPing] = useState("");
  const test = useAction(); // a test keeps the dialog open
  const body = () => ({
    name: f.name,
    type: f.type,
    url: f.url,
    insecure: f.insecure,
    credential: f.key ? { type: "basic", access_key: f.key, ...(f.secret ? { access_secret: f.secret } : {}) } : undefined,
  });
  const set = (k: string) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });
  return (
    <Dialog title={reg.id ? `Edit ${reg.name}` : "New registry"} open onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          act(() => (reg.id ? send("PUT", `/registries/${reg.id}`, body()) : send("POST", "/registries", body())));
        }}
      >
        <label for="rg-name">Name</label>
        <input id="rg-name" required value={f.name} onInput={set("name")} />
        <label for="rg-type">Type</label>
        <select id="rg-type" value={f.type} onChange={set("type")}>
          <option value="berth">Berth (zstd on the wire)</option>
          <option value="docker-registry">Any OCI / Docker registry</option>
        </select>
        <label for="rg-url">URL</label>
        <input id="rg-url" type="url" required placeholder="https://registry.example.org" value={f.url} onInput={set("url")} />
        <label for="rg-key">Username (empty: anonymous)</label>
        <input id="rg-key" autocomplete="off" value={f.key} onInput={set("key")} />
        <label for="rg-secret">Password or token{reg.id ? " (empty: unchanged)" : ""}</label>
        <input id="rg-secret" type="password" autocomplete="new-password" value={f.secret} onInput={set("secret")} />
        <label class="check">
          <input type="checkbox" checked={f.insecure} onChange={(e) => setF({ ...f, insecure: (e.target as HTMLInputElement).checked })} /> Skip TLS verification
        </label>
        {ping && <p role="status">{ping}</p>}
        <FormError msg={err || test.err} />
        <div class="actions">
          <button
            type="button"
            class="btn"
            onClick={() => {
              setPing("");
              test.act(async () => {
                await send("POST", "/registries/ping", body());
                setPing("Reachable with these settings.");
              });
            }}
          >
            Test connection
          </button>
        </div>
        <FormButtons onCancel={onClose} submit={reg.id ? "Save" : "Create"} />
      </form>
    </Dialog>
  );
}

/* ---- replication ---- */
interface Policy {
  id: number;
  name: string;
  description: string;
  src_registry: { id: number; name: string } | null;
  dest_registry: { id: number; name: string } | null;
  dest_namespace: string | null;
  dest_namespace_replace_count: number | null;
  filters: { type: string; value: string }[] | null;
  trigger: { type: string; trigger_settings?: { cron?: string } } | null;
  override: boolean;
  enabled: boolean;
  replicate_deletion: boolean;
  speed: number | null;
}
interface Execution {
  id: number;
  policy_id: number;
  status: string;
  trigger: string;
  status_text: string;
  start_time: string;
  end_time: string | null;
  total: number;
  succeed: number;
  failed: number;
  in_progress: number;
  stopped: number;
}

function statusClass(s: string) {
  return s === "Succeed" || s === "Succeeded" ? "ok" : s === "Failed" ? "bad" : s === "InProgress" || s === "Pending" ? "warn" : "";
}

function Policies() {
  const [tick, setTick] = useState(0);
  const [edit, setEdit] = useState<Partial<Policy> | null>(null);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  return (
    <>
      <FormError msg={err} />
      <h2>Policies</h2>
      <PagedTable<Policy>
        label="Replication policies"
        reloadKey={tick}
        rowKey={(p) => p.id}
        toolbar={
          <button type="button" class="btn primary" onClick={() => setEdit({ enabled: true, override: true })}>
            New policy
          </button>
        }
        fetch={(s) => list<Policy>(listUrl("/replication/policies", { page: s.page, pageSize: s.pageSize }))}
        empty="No replication policies."
        columns={[
          { label: "Name", render: (p) => p.name },
          { label: "Direction", render: (p) => (p.dest_registry ? `push to ${p.dest_registry.name}` : `pull from ${p.src_registry?.name ?? "?"}`) },
          { label: "Filters", render: (p) => <span class="wrap">{(p.filters ?? []).map((f) => `${f.type}: ${f.value}`).join(", ") || "everything"}</span> },
          { label: "Destination namespace", render: (p) => p.dest_namespace || "same" },
          { label: "Trigger", render: (p) => <span class="wrap">{triggerText(p)}</span> },
          { label: "Bandwidth", render: (p) => (p.speed && p.speed > 0 ? `${p.speed} KiB/s` : "unlimited") },
          { label: "Enabled", render: (p) => (p.enabled ? "yes" : "no") },
          {
            label: "Actions",
            render: (p) => (
              <span class="row-actions">
                <button type="button" class="btn primary" onClick={() => act(() => send("POST", "/replication/executions", { policy_id: p.id }))}>
                  Run now
                </button>
                <button type="button" class="btn" onClick={() => setEdit(p)}>
                  Edit
                </button>
                <button type="button" class="btn danger" onClick={() => confirm(`Delete policy ${p.name}?`) && act(() => send("DELETE", `/replication/policies/${p.id}`))}>
                  Delete
                </button>
              </span>
            ),
          },
        ]}
      />
      <h2>Executions</h2>
      <Executions tick={tick} />
      {edit && <PolicyForm pol={edit} onClose={() => setEdit(null)} onDone={() => setTick((t) => t + 1)} />}
    </>
  );
}

/** A policy's trigger in words, for the list */
function triggerText(p: Policy): string {
  const t = p.trigger?.type ?? "manual";
  if (t === "event_based") return p.replicate_deletion ? "on push and delete" : "on push";
  if (t === "scheduled") return `scheduled: ${describeCron(p.trigger?.trigger_settings?.cron ?? "")}`;
  return "manual";
}

/** Re-render every `ms` while `on`: executions in progress are polled. */
function usePoll(on: boolean, ms: number) {
  const [n, setN] = useState(0);
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setN((x) => x + 1), ms);
    return () => clearInterval(t);
  }, [on, ms]);
  return n;
}

function Executions({ tick }: { tick: number }) {
  const [live, setLive] = useState(false);
  const poll = usePoll(live, 2000);
  return (
    <PagedTable<Execution>
      label="Executions"
      reloadKey={tick * 100000 + poll}
      rowKey={(e) => e.id}
      fetch={async (s) => {
        const r = await list<Execution>(listUrl("/replication/executions", { page: s.page, pageSize: s.pageSize }));
        setLive(r.items.some((e) => e.status === "InProgress" || e.status === "Pending"));
        return r;
      }}
      empty="Nothing has run yet."
      columns={[
        { label: "ID", render: (e) => <a href={`/admin/replication/executions/${e.id}`}>#{e.id}</a> },
        { label: "Policy", render: (e) => e.policy_id },
        { label: "Status", render: (e) => <span class={`badge ${statusClass(e.status)}`}>{e.status}</span> },
        { label: "Tasks", render: (e) => `${e.succeed}/${e.total} done, ${e.failed} failed, ${e.in_progress} running` },
        { label: "Trigger", render: (e) => e.trigger },
        { label: "Started", render: (e) => formatTime(e.start_time) },
      ]}
    />
  );
}

function PolicyForm({ pol, onClose, onDone }: { pol: Partial<Policy>; onClose: () => void; onDone: () => void }) {
  const regs = useLoad("regs", () => list<Registry>("/registries?page_size=100"));
  const [f, setF] = useState({
    name: pol.name ?? "",
    direction: pol.src_registry ? "pull" : "push",
    registry: String(pol.dest_registry?.id ?? pol.src_registry?.id ?? ""),
    name_filter: pol.filters?.find((x) => x.type === "name")?.value ?? "",
    tag_filter: pol.filters?.find((x) => x.type === "tag")?.value ?? "",
    dest_namespace: pol.dest_namespace ?? "",
    replace: String(pol.dest_namespace_replace_count ?? 1),
    trigger: pol.trigger?.type ?? "manual",
    cron: pol.trigger?.trigger_settings?.cron ?? "",
    speed: String(pol.speed ?? -1),
    override: pol.override ?? true,
    enabled: pol.enabled ?? true,
    deletion: pol.replicate_deletion ?? false,
  });
  const cronErr = f.trigger === "scheduled" ? cronProblem(f.cron) : null;
  const { err, act } = useAction(() => {
    onDone();
    onClose();
  });
  const set = (k: string) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });
  const body = () => {
    const filters = [
      ...(f.name_filter ? [{ type: "name", value: f.name_filter }] : []),
      ...(f.tag_filter ? [{ type: "tag", value: f.tag_filter }] : []),
    ];
    const reg = { id: Number(f.registry) };
    return {
      name: f.name,
      ...(f.direction === "push" ? { dest_registry: reg } : { src_registry: reg }),
      filters,
      dest_namespace: f.dest_namespace || null,
      dest_namespace_replace_count: Number(f.replace),
      trigger: f.trigger === "scheduled" ? { type: "scheduled", trigger_settings: { cron: f.cron } } : { type: f.trigger },
      speed: Number(f.speed),
      override: f.override,
      enabled: f.enabled,
      replicate_deletion: f.trigger === "event_based" && f.deletion,
    };
  };
  return (
    <Dialog title={pol.id ? `Edit ${pol.name}` : "New replication policy"} open onClose={onClose}>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          if (cronErr) return; // shown next to the field; berthd would refuse it too
          act(() => (pol.id ? send("PUT", `/replication/policies/${pol.id}`, body()) : send("POST", "/replication/policies", body())));
        }}
      >
        <label for="rp-name">Name</label>
        <input id="rp-name" required value={f.name} onInput={set("name")} />
        <label for="rp-dir">Direction</label>
        <select id="rp-dir" value={f.direction} onChange={set("direction")}>
          <option value="push">Push to another registry</option>
          <option value="pull">Pull from another registry</option>
        </select>
        <label for="rp-reg">Registry</label>
        <select id="rp-reg" required value={f.registry} onChange={set("registry")}>
          <option value="">— choose —</option>
          {(regs.data?.items ?? []).map((r) => (
            <option value={String(r.id)}>
              {r.name} ({r.url})
            </option>
          ))}
        </select>
        <label for="rp-nf">Repository filter (doublestar, e.g. library/**)</label>
        <input id="rp-nf" value={f.name_filter} onInput={set("name_filter")} />
        <label for="rp-tf">Tag filter (e.g. v*)</label>
        <input id="rp-tf" value={f.tag_filter} onInput={set("tag_filter")} />
        <label for="rp-ns">Destination namespace (empty: same as the source)</label>
        <input id="rp-ns" value={f.dest_namespace} onInput={set("dest_namespace")} />
        <label for="rp-flat">Flattening (path components replaced by the namespace)</label>
        <select id="rp-flat" value={f.replace} onChange={set("replace")}>
          <option value="0">none (prefix the whole path)</option>
          <option value="1">replace 1 level</option>
          <option value="2">replace 2 levels</option>
          <option value="3">replace 3 levels</option>
          <option value="-1">flatten all levels</option>
        </select>
        <fieldset>
          <legend>Trigger</legend>
          {(
            [
              ["manual", "Manual (Run now)"],
              ["event_based", "When something is pushed here"],
              ["scheduled", "On a schedule"],
            ] as const
          ).map(([v, label]) => (
            <label class="check">
              <input type="radio" name="rp-trigger" value={v} checked={f.trigger === v} onChange={() => setF({ ...f, trigger: v, cron: v === "scheduled" && !f.cron ? CRON_PRESETS[1][0] : f.cron })} />{" "}
              {label}
            </label>
          ))}
          {f.trigger === "event_based" && (
            <label class="check sub">
              <input type="checkbox" checked={f.deletion} onChange={(e) => setF({ ...f, deletion: (e.target as HTMLInputElement).checked })} /> Also delete on the
              other side what is deleted here
            </label>
          )}
          {f.trigger === "scheduled" && (
            <div class="form">
              <label for="rp-preset">Schedule</label>
              <select id="rp-preset" value={CRON_PRESETS.some(([c]) => c === f.cron.trim()) ? f.cron.trim() : ""} onChange={(e) => {
                const v = (e.target as HTMLSelectElement).value;
                if (v) setF({ ...f, cron: v });
              }}>
                {CRON_PRESETS.map(([c, label]) => (
                  <option value={c}>{label}</option>
                ))}
                <option value="">custom</option>
              </select>
              <label for="rp-cron">Cron: second minute hour day-of-month month day-of-week (server time)</label>
              <input id="rp-cron" required class="mono" value={f.cron} aria-invalid={cronErr ? "true" : undefined} aria-describedby="rp-cron-says" onInput={set("cron")} />
              <p id="rp-cron-says" class={cronErr ? "form-error" : "muted"} role="status">
                {cronErr ? `Not a schedule Berth runs: ${cronErr}.` : `Runs ${describeCron(f.cron)}.`}
              </p>
            </div>
          )}
        </fieldset>
        <label for="rp-speed">Bandwidth limit in KiB/s (-1: unlimited)</label>
        <input id="rp-speed" type="number" min="-1" value={f.speed} onInput={set("speed")} />
        <label class="check">
          <input type="checkbox" checked={f.override} onChange={(e) => setF({ ...f, override: (e.target as HTMLInputElement).checked })} /> Overwrite existing tags
        </label>
        <label class="check">
          <input type="checkbox" checked={f.enabled} onChange={(e) => setF({ ...f, enabled: (e.target as HTMLInputElement).checked })} /> Enabled
        </label>
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit={pol.id ? "Save" : "Create"} />
      </form>
    </Dialog>
  );
}

interface Task {
  id: number;
  src_resource: string;
  dst_resource: string;
  status: string;
  attempts: number;
  bytes_sent: number;
  bytes_total: number;
  start_time: string | null;
  end_time: string | null;
}

function Execution({ id }: { id: string }) {
  const [running, setRunning] = useState(true);
  const poll = usePoll(running, 1500);
  const ex = useLoad(`exec|${id}|${poll}`, () => get<Execution>(`/replication/executions/${id}`));
  const tasks = useLoad(`tasks|${id}|${poll}`, () => list<Task>(`/replication/executions/${id}/tasks?page_size=100`));
  const [log, setLog] = useState<{ id: number; text: string } | null>(null);
  const { act } = useAction();
  useEffect(() => {
    if (ex.data) setRunning(ex.data.status === "InProgress" || ex.data.status === "Pending");
  }, [ex.data?.status]);
  if (ex.error) return <ErrorBox error={ex.error} retry={ex.reload} />;
  if (!ex.data) return <Loading />;
  const e = ex.data;
  const items = tasks.data?.items ?? [];
  const sent = items.reduce((n, t) => n + t.bytes_sent, 0);
  const secs = ((e.end_time ? Date.parse(e.end_time) : Date.now()) - Date.parse(e.start_time)) / 1000;
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/admin/replication">Replication</a> / <span>execution #{e.id}</span>
      </nav>
      <h2>
        Execution #{e.id} <span class={`badge ${statusClass(e.status)}`}>{e.status}</span>
      </h2>
      <dl class="kv card">
        <dt>Tasks</dt>
        <dd>
          {e.succeed} succeeded, {e.failed} failed, {e.in_progress} running or waiting, {e.stopped} stopped, of {e.total}
        </dd>
        <dt>Transferred</dt>
        <dd>
          {formatBytes(sent)} at {formatRate(sent, secs)}
        </dd>
        <dt>Started</dt>
        <dd>{formatTime(e.start_time)}</dd>
        <dt>Ended</dt>
        <dd>{e.end_time ? formatTime(e.end_time) : running ? "running (refreshing)" : "—"}</dd>
        {e.status_text && (
          <>
            <dt>Status</dt>
            <dd>{e.status_text}</dd>
          </>
        )}
      </dl>
      {running && (
        <p>
          <button type="button" class="btn danger" onClick={() => act(() => send("PUT", `/replication/executions/${id}`, {}))}>
            Stop
          </button>
        </p>
      )}
      <div class="table-wrap">
        <table aria-label="Tasks">
          <thead>
            <tr>
              <th scope="col">Source</th>
              <th scope="col">Destination</th>
              <th scope="col">Status</th>
              <th scope="col">Progress</th>
              <th scope="col">Log</th>
            </tr>
          </thead>
          <tbody>
            {items.map((t) => (
              <tr>
                <td data-label="Source" class="wrap">
                  {t.src_resource}
                </td>
                <td data-label="Destination" class="wrap">
                  {t.dst_resource}
                </td>
                <td data-label="Status">
                  <span class={`badge ${statusClass(t.status)}`}>{t.status}</span>
                  {t.attempts > 1 && <span class="muted"> ({t.attempts} attempts)</span>}
                </td>
                <td data-label="Progress">
                  <progress max={Math.max(t.bytes_total, 1)} value={t.bytes_sent} aria-label={`Progress of ${t.src_resource}`} /> {formatBytes(t.bytes_sent)}
                </td>
                <td data-label="Log">
                  <button
                    type="button"
                    class="btn"
                    onClick={async () => {
                      const r = await call("GET", `/replication/executions/${id}/tasks/${t.id}/log`, { raw: true });
                      setLog({ id: t.id, text: await r.text() });
                    }}
                  >
                    Log
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Dialog title={`Task ${log?.id ?? ""} log`} open={log != null} onClose={() => setLog(null)}>
        <pre>{log?.text || "(empty)"}</pre>
        <button type="button" class="btn" onClick={() => setLog(null)}>
          Close
        </button>
      </Dialog>
    </>
  );
}

/* ---- audit log ---- */
/** Filters live in the URL (?op=&rt=&user=) next to the list's own state, so a filtered log is a link. */
function Audit() {
  const sp = new URLSearchParams(loc.value.search);
  const f = { op: sp.get("op") ?? "", rt: sp.get("rt") ?? "", user: sp.get("user") ?? "" };
  const setF = (k: string, v: string) => {
    const n = new URLSearchParams(loc.value.search);
    if (v) n.set(k, v);
    else n.delete(k);
    n.delete("page");
    setSearch(n.toString() ? "?" + n.toString() : "");
  };
  const [user, setUser] = useState(f.user);
  return (
    <>
      <div class="toolbar">
        <label>
          Operation{" "}
          <select value={f.op} onChange={(e) => setF("op", (e.target as HTMLSelectElement).value)}>
            {["", "push", "pull", "delete", "create", "update", "login"].map((o) => (
              <option value={o}>{o || "any"}</option>
            ))}
          </select>
        </label>
        <label>
          Resource type{" "}
          <select value={f.rt} onChange={(e) => setF("rt", (e.target as HTMLSelectElement).value)}>
            {["", "artifact", "repository", "project", "member", "robot", "user", "session", "registry", "replication"].map((o) => (
              <option value={o}>{o || "any"}</option>
            ))}
          </select>
        </label>
        <label>
          User <input value={user} onInput={(e) => setUser((e.target as HTMLInputElement).value)} onChange={() => setF("user", user)} />
        </label>
      </div>
      <PagedTable
        label="Audit log"
        searchLabel="Filter by resource"
        rowKey={(r: { id: number }) => r.id}
        fetch={(s) => list(listUrl("/audit-logs", { page: s.page, pageSize: s.pageSize, q: { operation: f.op, resource_type: f.rt, username: f.user, resource: s.q } }))}
        empty="No events match."
        columns={auditColumns()}
      />
    </>
  );
}

/* ---- system ---- */
function System() {
  const info = useLoad("sysinfo", () => get<Record<string, unknown>>("/systeminfo"));
  const health = useLoad("health", async () => {
    const r = await call("GET", "/health", { raw: true });
    return (await r.json()) as { status: string; components: { name: string; status: string }[] };
  });
  return (
    <div class="grid2">
      <section class="card" aria-labelledby="sys-h">
        <h2 id="sys-h">System</h2>
        {info.data ? (
          <dl class="kv">
            {Object.entries(info.data).map(([k, v]) => (
              <>
                <dt>{k}</dt>
                <dd>{String(v)}</dd>
              </>
            ))}
          </dl>
        ) : (
          <Loading />
        )}
        <h3>Health</h3>
        {health.data && (
          <ul class="plain">
            {health.data.components.map((c) => (
              <li>
                {c.name}: <span class={`badge ${c.status === "healthy" ? "ok" : "bad"}`}>{c.status}</span>
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  );
}

/* ---- LDAP ---- */
interface LdapUser {
  username: string;
  realname?: string;
  email?: string;
  ldap_dn: string;
}
interface LdapGroup {
  group_name: string;
  ldap_group_dn: string;
}
interface UserGroup {
  id: number;
  group_name: string;
  group_type: number;
  ldap_group_dn: string;
}

/** DNs as the directory compares them: case and the spaces around separators do not matter */
export function sameDn(a: string, b: string): boolean {
  const norm = (d: string) => d.split(",").map((p) => p.split("=").map((x) => x.trim()).join("=")).join(",").toLowerCase();
  return norm(a) === norm(b);
}

/** Harbor's import answer: 200, or 404 with the ids it could not import and why */
export function importOutcome(asked: string[], failed: { uid: string; error: string }[]): { imported: string[]; failed: { uid: string; error: string }[] } {
  const bad = new Set(failed.map((f) => f.uid));
  return { imported: asked.filter((u) => !bad.has(u)), failed };
}

/** Directory users and groups: find them, import users before their first sign-in, add groups (then they can be
 *  project members) and remove them. Only where berthd has LDAP configured (systeminfo auth_mode ldap_auth). */
function Ldap() {
  const info = useLoad("sysinfo", () => get<{ auth_mode: string }>("/systeminfo"));
  const [ping, setPing] = useState("");
  const { err, act } = useAction();
  if (info.error) return <ErrorBox error={info.error} retry={info.reload} />;
  if (!info.data) return <Loading />;
  if (info.data.auth_mode !== "ldap_auth")
    return (
      <Empty>
        LDAP is not configured: people sign in with Berth's own accounts. Set <code>ldap.url</code> (and the search and group settings) in
        berthd's configuration to add a directory.
      </Empty>
    );
  return (
    <>
      <section class="card" aria-labelledby="ldapc-h">
        <h2 id="ldapc-h">Directory</h2>
        <p>Directory users sign in with their LDAP password; they are added to Berth at their first sign-in, or here beforehand.</p>
        <FormError msg={err} />
        <button
          type="button"
          class="btn"
          onClick={() => {
            setPing("");
            act(async () => {
              await send("POST", "/ldap/ping", {});
              setPing("LDAP answers.");
            });
          }}
        >
          Test the LDAP connection
        </button>
        {ping && <p role="status">{ping}</p>}
      </section>
      <LdapUsers />
      <LdapGroups />
    </>
  );
}

function LdapUsers() {
  const [q, setQ] = useState("");
  const [found, setFound] = useState<LdapUser[] | null>(null);
  const [known, setKnown] = useState<Set<string>>(new Set());
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [outcome, setOutcome] = useState<ReturnType<typeof importOutcome> | null>(null);
  // a refused import names why on its row: a local account of that name is not the directory user
  const refused = new Map((outcome?.failed ?? []).map((f) => [f.uid, f.error]));
  const { err, act } = useAction();
  const lookKnown = async (term: string) => {
    const users = await list<UserRow>(listUrl("/users", { page: 1, pageSize: 100, extra: { username: term || undefined } }));
    setKnown(new Set(users.items.map((u) => u.username.toLowerCase())));
  };
  const search = () =>
    act(async () => {
      setOutcome(null);
      setPicked(new Set());
      setFound(await get<LdapUser[]>(`/ldap/users/search?username=${encodeURIComponent(q)}`));
      await lookKnown(q);
    });
  const importPicked = () =>
    act(async () => {
      const asked = [...picked];
      const r = await call("POST", "/ldap/users/import", { body: { ldap_uid_list: asked }, raw: true });
      if (!r.ok && r.status !== 404) throw new Error(`import failed: HTTP ${r.status}`);
      setOutcome(importOutcome(asked, r.status === 404 ? await r.json() : []));
      setPicked(new Set());
      await lookKnown(q);
    });
  const toggle = (u: string) => {
    const n = new Set(picked);
    if (n.has(u)) n.delete(u);
    else n.add(u);
    setPicked(n);
  };
  return (
    <section aria-labelledby="ldapu-h">
      <h2 id="ldapu-h">Import users</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          search();
        }}
      >
        <label for="ldap-q">Find LDAP users</label>
        <input id="ldap-q" type="search" class="wide" placeholder="uid (empty: the first 100)" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <button type="submit" class="btn">
          Search users
        </button>
      </form>
      <FormError msg={err} />
      {outcome && (
        <div role="status" class="card">
          {outcome.imported.length > 0 && <p>Imported: {outcome.imported.join(", ")}.</p>}
          {outcome.failed.length > 0 && (
            <ul class="plain" aria-label="Not imported">
              {outcome.failed.map((f) => (
                <li>
                  <span class="badge bad">not imported</span> {f.uid}: {f.error}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {found &&
        (found.length === 0 ? (
          <Empty>No directory user matches.</Empty>
        ) : (
          <>
            <div class="toolbar">
              <button type="button" class="btn primary" disabled={picked.size === 0} onClick={importPicked}>
                Import selected ({picked.size})
              </button>
            </div>
            <div class="table-wrap">
              <table aria-label="LDAP users">
                <thead>
                  <tr>
                    <th scope="col">Select</th>
                    <th scope="col">Username</th>
                    <th scope="col">Name</th>
                    <th scope="col">Email</th>
                    <th scope="col">In Berth</th>
                  </tr>
                </thead>
                <tbody>
                  {found.map((u) => (
                    <tr>
                      <td data-label="Select">
                        <input type="checkbox" checked={picked.has(u.username)} aria-label={`Select ${u.username}`} onChange={() => toggle(u.username)} />
                      </td>
                      <td data-label="Username">{u.username}</td>
                      <td data-label="Name">{u.realname || "—"}</td>
                      <td data-label="Email" class="wrap">
                        {u.email || "—"}
                      </td>
                      <td data-label="In Berth">
                        {refused.get(u.username) ? (
                          <span class="badge bad">{refused.get(u.username)}</span>
                        ) : known.has(u.username.toLowerCase()) ? (
                          <span class="badge ok">user</span>
                        ) : (
                          <span class="muted">not yet</span>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        ))}
    </section>
  );
}

/** LDAP groups: search by name and add one as a Berth user group (then it can be a project member); Berth's groups, removable. */
function LdapGroups() {
  const [q, setQ] = useState("");
  const [found, setFound] = useState<LdapGroup[] | null>(null);
  const [msg, setMsg] = useState("");
  const [tick, setTick] = useState(0);
  const ours = useLoad(`ugroups|${tick}`, () => list<UserGroup>("/usergroups?page_size=100"));
  const { err, act } = useAction(() => setTick((t) => t + 1));
  const inBerth = (g: LdapGroup) => (ours.data?.items ?? []).some((o) => sameDn(o.ldap_group_dn, g.ldap_group_dn));
  return (
    <section aria-labelledby="ldapg-h">
      <h2 id="ldapg-h">Groups</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          setMsg("");
          act(async () => setFound(await get(`/ldap/groups/search?groupname=${encodeURIComponent(q)}`)));
        }}
      >
        <label for="ldap-g">Find LDAP groups</label>
        <input id="ldap-g" type="search" class="wide" placeholder="name (empty: the first 100)" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <button type="submit" class="btn">
          Search groups
        </button>
      </form>
      <FormError msg={err} />
      {msg && <p role="status">{msg}</p>}
      {found &&
        (found.length === 0 ? (
          <Empty>No directory group matches.</Empty>
        ) : (
          <div class="table-wrap">
            <table aria-label="LDAP groups">
              <thead>
                <tr>
                  <th scope="col">Group</th>
                  <th scope="col">DN</th>
                  <th scope="col">In Berth</th>
                </tr>
              </thead>
              <tbody>
                {found.map((g) => (
                  <tr>
                    <td data-label="Group">{g.group_name}</td>
                    <td data-label="DN" class="wrap">
                      {g.ldap_group_dn}
                    </td>
                    <td data-label="In Berth">
                      {inBerth(g) ? (
                        <span class="badge ok">added</span>
                      ) : (
                        <button
                          type="button"
                          class="btn small"
                          aria-label={`Add group ${g.group_name}`}
                          onClick={() =>
                            act(async () => {
                              await send("POST", "/usergroups", { group_name: g.group_name, group_type: 1, ldap_group_dn: g.ldap_group_dn });
                              setMsg(`${g.group_name} added: it can now be made a project member.`);
                            })
                          }
                        >
                          Add
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      <h3>Berth's LDAP groups</h3>
      {ours.error ? (
        <ErrorBox error={ours.error} retry={ours.reload} />
      ) : !ours.data ? (
        <Loading />
      ) : ours.data.items.length === 0 ? (
        <Empty>No groups yet: add one above, or name its DN when adding a project member.</Empty>
      ) : (
        <div class="table-wrap">
          <table aria-label="Berth's LDAP groups">
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col">DN</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {ours.data.items.map((g) => (
                <tr>
                  <td data-label="Group">{g.group_name}</td>
                  <td data-label="DN" class="wrap">
                    {g.ldap_group_dn}
                  </td>
                  <td data-label="Actions">
                    <button
                      type="button"
                      class="btn danger"
                      aria-label={`Remove group ${g.group_name}`}
                      onClick={() =>
                        confirm(`Remove group ${g.group_name}? It stops being a member of every project.`) &&
                        act(async () => {
                          await send("DELETE", `/usergroups/${g.id}`);
                          setMsg(`${g.group_name} removed.`);
                        })
                      }
                    >
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
