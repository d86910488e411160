// One project: repositories, members, robot accounts, logs, webhooks and settings, each a tab with its own URL.
// What the caller may do comes from /users/current/permissions?scope=/project/<name>.
import { useEffect, useState } from "preact/hooks";
import { ApiError, get, list, send } from "../api";
import { formatAgo, formatTime, robotExpiry, ROLES, roleName } from "../format";
import { Perms, ROBOT_PERMISSIONS, type Permission } from "../perms";
import { listUrl, repoInProject } from "../query";
import { parseSpeed } from "../proxy";
import { navigate } from "../router";
import { me } from "../session";
import { copyText, Dialog } from "../ui/dialog";
import { ErrorBox, FormButtons, FormError, Loading, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";
import { ImmutableRules, RetentionRules } from "./policies";
import { ProjectQuota } from "./quotas";
import type { Endpoint, Project } from "./projects";
import { Webhooks } from "./webhooks";

export function useProjectPerms(name: string) {
  const u = me.value;
  return useLoad(`perms|${name}|${u?.username ?? ""}`, async () =>
    u ? new Perms(await get<Permission[]>(`/users/current/permissions?scope=${encodeURIComponent("/project/" + name)}`), u.sysadmin_flag) : new Perms([]),
  );
}

const TABS = [
  ["repositories", "Repositories", "repository", "list"],
  ["members", "Members", "member", "list"],
  ["robots", "Robot accounts", "robot", "list"],
  ["logs", "Logs", "log", "list"],
  ["immutability", "Tag immutability", "immutable-tag", "list"],
  ["retention", "Tag retention", "tag-retention", "read"],
  ["webhooks", "Webhooks", "notification-policy", "list"],
  ["settings", "Settings", "project", "read"],
] as const;

export function ProjectPage({ name, tab }: { name: string; tab: string }) {
  const proj = useLoad(`project|${name}`, () => get<Project>(`/projects/${encodeURIComponent(name)}`));
  const perms = useProjectPerms(name);
  if (proj.error) return <ErrorBox error={proj.error} retry={proj.reload} />;
  if (!proj.data || !perms.data) return <Loading />;
  const p = proj.data;
  const pm = perms.data;
  const anon = !me.value;
  const tabs = TABS.filter(([id, , res, act]) => id === "repositories" || (!anon && (pm.can(res, act) || (id === "settings" && pm.can("project", "update")))));
  const cur = tabs.find(([id]) => id === tab) ? tab : "repositories";
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/projects">Projects</a> / <span>{p.name}</span>
      </nav>
      <div class="page-head">
        <h1>{p.name}</h1>
        <span class={`badge ${p.metadata.public === "true" ? "ok" : ""}`}>{p.metadata.public === "true" ? "Public" : "Private"}</span>
        {p.current_user_role_id > 0 && <span class="badge">{roleName(p.current_user_role_id)}</span>}
        <span class="badge" title="ISA policy">ISA: {p.metadata.isa_policy ?? "off"}</span>
        {p.registry_id != null && <span class="badge">Proxy cache</span>}
        {!anon && (
          <span class="head-quota">
            Storage: <ProjectQuota project={p.name} />
          </span>
        )}
      </div>
      <nav class="tabs" aria-label="Project sections">
        {tabs.map(([id, label]) => (
          <a href={`/projects/${encodeURIComponent(name)}/${id}`} aria-current={id === cur ? "page" : undefined}>
            {label}
          </a>
        ))}
      </nav>
      {cur === "repositories" && <Repositories project={p} perms={pm} />}
      {cur === "members" && <Members project={p} perms={pm} />}
      {cur === "robots" && <Robots project={p} perms={pm} />}
      {cur === "logs" && <Logs project={p} />}
      {cur === "immutability" && <ImmutableRules project={p} perms={pm} />}
      {cur === "retention" && <RetentionRules project={p} perms={pm} onChanged={proj.reload} />}
      {cur === "webhooks" && <Webhooks project={p} perms={pm} />}
      {cur === "settings" && <Settings project={p} perms={pm} onSaved={proj.reload} />}
    </>
  );
}

interface Repo {
  id: number;
  name: string;
  artifact_count: number;
  pull_count: number;
  creation_time: string;
  update_time: string;
}

function Repositories({ project, perms }: { project: Project; perms: Perms }) {
  const [tick, setTick] = useState(0);
  const canDelete = perms.can("repository", "delete");
  const pname = encodeURIComponent(project.name);
  return (
    <PagedTable<Repo>
      label="Repositories"
      searchLabel="Search repositories"
      defaultSort="name"
      reloadKey={tick}
      rowKey={(r) => r.id}
      fetch={(s) => list<Repo>(listUrl(`/projects/${pname}/repositories`, { page: s.page, pageSize: s.pageSize, sort: s.sort, q: s.q ? { name: "~" + s.q } : undefined }))}
      empty={
        <>
          No repositories yet. Push one with <code>docker push {location.host}/{project.name}/IMAGE:TAG</code>.
        </>
      }
      columns={[
        {
          label: "Name",
          sort: "name",
          render: (r) => <a href={`/projects/${pname}/repositories/${encodeURIComponent(repoInProject(project.name, r.name))}`}>{r.name}</a>,
        },
        { label: "Artifacts", class: "num", render: (r) => r.artifact_count },
        { label: "Pulls", sort: "pull_count", class: "num", render: (r) => r.pull_count },
        { label: "Updated", sort: "update_time", render: (r) => <time dateTime={r.update_time} title={formatTime(r.update_time)}>{formatAgo(r.update_time)}</time> },
        ...(canDelete
          ? [
              {
                label: "Actions",
                render: (r: Repo) => (
                  <button
                    type="button"
                    class="btn danger"
                    aria-label={`Delete repository ${r.name}`}
                    onClick={async () => {
                      if (!confirm(`Delete ${r.name} and every artifact in it?`)) return;
                      await send("DELETE", `/projects/${pname}/repositories/${encodeURIComponent(encodeURIComponent(repoInProject(project.name, r.name)))}`);
                      setTick((t) => t + 1);
                    }}
                  >
                    Delete
                  </button>
                ),
              },
            ]
          : []),
      ]}
    />
  );
}

interface Member {
  id: number;
  entity_name: string;
  entity_type: string;
  role_id: number;
}

function Members({ project, perms }: { project: Project; perms: Perms }) {
  const [tick, setTick] = useState(0);
  const [open, setOpen] = useState(false);
  const pname = encodeURIComponent(project.name);
  const canEdit = perms.can("member", "update");
  const canAdd = perms.can("member", "create");
  const canDel = perms.can("member", "delete");
  const { err, act } = useAction(() => setTick((t) => t + 1));
  return (
    <>
      <FormError msg={err} />
      <PagedTable<Member>
        label="Members"
        searchLabel="Search members"
        reloadKey={tick}
        rowKey={(m) => m.id}
        toolbar={
          canAdd && (
            <button type="button" class="btn primary" onClick={() => setOpen(true)}>
              Add member
            </button>
          )
        }
        fetch={(s) => list<Member>(listUrl(`/projects/${pname}/members`, { page: s.page, pageSize: s.pageSize, extra: { entityname: s.q || undefined } }))}
        empty="No members."
        columns={[
          { label: "Name", render: (m) => m.entity_name },
          { label: "Type", render: (m) => (m.entity_type === "g" ? "LDAP group" : "User") },
          {
            label: "Role",
            render: (m) =>
              canEdit ? (
                <select
                  aria-label={`Role of ${m.entity_name}`}
                  value={String(m.role_id)}
                  onChange={(e) => act(() => send("PUT", `/projects/${pname}/members/${m.id}`, { role_id: Number((e.target as HTMLSelectElement).value) }))}
                >
                  {Object.entries(ROLES).map(([id, n]) => (
                    <option value={id}>{n}</option>
                  ))}
                </select>
              ) : (
                roleName(m.role_id)
              ),
          },
          ...(canDel
            ? [
                {
                  label: "Actions",
                  render: (m: Member) => (
                    <button
                      type="button"
                      class="btn danger"
                      aria-label={`Remove ${m.entity_name}`}
                      onClick={() => confirm(`Remove ${m.entity_name} from ${project.name}?`) && act(() => send("DELETE", `/projects/${pname}/members/${m.id}`))}
                    >
                      Remove
                    </button>
                  ),
                },
              ]
            : []),
        ]}
      />
      <AddMember project={project} open={open} onClose={() => setOpen(false)} onAdded={() => setTick((t) => t + 1)} />
    </>
  );
}

function AddMember({ project, open, onClose, onAdded }: { project: Project; open: boolean; onClose: () => void; onAdded: () => void }) {
  const [kind, setKind] = useState("u");
  const [name, setName] = useState("");
  const [role, setRole] = useState("3");
  const [err, setErr] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr("");
    try {
      const body =
        kind === "u" ? { role_id: Number(role), member_user: { username: name } } : { role_id: Number(role), member_group: { ldap_group_dn: name, group_type: 1 } };
      await send("POST", `/projects/${encodeURIComponent(project.name)}/members`, body);
      setName("");
      onAdded();
      onClose();
    } catch (x) {
      setErr(x instanceof ApiError && x.status === 404 ? `No user or group “${name}”.` : x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <Dialog title="Add member" open={open} onClose={onClose}>
      <form class="form" onSubmit={submit}>
        <fieldset>
          <legend>Member type</legend>
          <label class="check">
            <input type="radio" name="mk" checked={kind === "u"} onChange={() => setKind("u")} /> User
          </label>
          <label class="check">
            <input type="radio" name="mk" checked={kind === "g"} onChange={() => setKind("g")} /> LDAP group (DN)
          </label>
        </fieldset>
        <label for="am-name">{kind === "u" ? "Username" : "Group DN"}</label>
        <input id="am-name" required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="am-role">Role</label>
        <select id="am-role" value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value)}>
          {Object.entries(ROLES).map(([id, n]) => (
            <option value={id}>{n}</option>
          ))}
        </select>
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit="Add" />
      </form>
    </Dialog>
  );
}

interface Robot {
  id: number;
  name: string;
  description: string;
  disable: boolean;
  expires_at: number;
  /** days from creation, -1 for never */
  duration: number;
  creation_time: string;
  permissions: { namespace: string; access: Permission[] }[];
}

function Robots({ project, perms }: { project: Project; perms: Perms }) {
  const [tick, setTick] = useState(0);
  const [open, setOpen] = useState(false);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const [expiryOf, setExpiryOf] = useState<Robot | null>(null);
  const [err, setErr] = useState("");
  const pname = encodeURIComponent(project.name);
  const act = async (f: () => Promise<unknown>) => {
    setErr("");
    try {
      await f();
      setTick((t) => t + 1);
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <>
      <FormError msg={err} />
      <PagedTable<Robot>
        label="Robot accounts"
        reloadKey={tick}
        rowKey={(r) => r.id}
        toolbar={
          perms.can("robot", "create") && (
            <button type="button" class="btn primary" onClick={() => setOpen(true)}>
              New robot account
            </button>
          )
        }
        fetch={(s) => list<Robot>(listUrl(`/projects/${pname}/robots`, { page: s.page, pageSize: s.pageSize }))}
        empty="No robot accounts."
        columns={[
          { label: "Name", render: (r) => <code>{r.name}</code> },
          { label: "Status", render: (r) => <span class={`badge ${r.disable ? "bad" : "ok"}`}>{r.disable ? "Disabled" : "Enabled"}</span> },
          { label: "Permissions", render: (r) => r.permissions.flatMap((p) => p.access.map((a) => `${a.resource}:${a.action}`)).join(", ") },
          { label: "Expires", render: (r) => (r.expires_at < 0 ? "never" : formatTime(r.expires_at)) },
          {
            label: "Actions",
            render: (r) => (
              <span class="row-actions">
                {perms.can("robot", "update") && (
                  <>
                    <button type="button" class="btn" onClick={() => act(() => send("PUT", `/robots/${r.id}`, { disable: !r.disable }))}>
                      {r.disable ? "Enable" : "Disable"}
                    </button>
                    <button type="button" class="btn" aria-label={`Change the expiry of ${r.name}`} onClick={() => setExpiryOf(r)}>
                      Expiry…
                    </button>
                    <button
                      type="button"
                      class="btn"
                      onClick={() =>
                        act(async () => {
                          const res = await send("PATCH", `/robots/${r.id}`, {});
                          const j = await res.json();
                          setSecret({ name: r.name, secret: j.secret });
                        })
                      }
                    >
                      Refresh secret
                    </button>
                  </>
                )}
                {perms.can("robot", "delete") && (
                  <button type="button" class="btn danger" onClick={() => confirm(`Delete ${r.name}?`) && act(() => send("DELETE", `/robots/${r.id}`))}>
                    Delete
                  </button>
                )}
              </span>
            ),
          },
        ]}
      />
      <NewRobot
        project={project}
        perms={perms}
        open={open}
        onClose={() => setOpen(false)}
        onCreated={(s) => {
          setSecret(s);
          setTick((t) => t + 1);
        }}
      />
      <SecretOnce value={secret} onClose={() => setSecret(null)} />
      <RobotExpiry robot={expiryOf} onClose={() => setExpiryOf(null)} onDone={() => setTick((t) => t + 1)} />
    </>
  );
}

/** Change how long a robot lives: a number of days from its creation (as Harbor counts), or never. */
function RobotExpiry({ robot, onClose, onDone }: { robot: Robot | null; onClose: () => void; onDone: () => void }) {
  const [never, setNever] = useState(false);
  const [days, setDays] = useState("30");
  const { err, setErr, act } = useAction(() => {
    onDone();
    onClose();
  });
  useEffect(() => { // opened for a robot: start from what it has
    if (!robot) return;
    setNever(robot.duration === -1);
    setDays(robot.duration === -1 ? "30" : String(robot.duration));
    setErr("");
  }, [robot]);
  const n = never ? -1 : Number(days);
  const preview = robot ? robotExpiry(robot.creation_time, n) : null;
  return (
    <Dialog title={`Expiry of ${robot?.name ?? ""}`} open={robot != null} onClose={onClose}>
      {robot && (
        <form
          class="form"
          onSubmit={(e) => {
            e.preventDefault();
            act(() => send("PUT", `/robots/${robot.id}`, { duration: n }));
          }}
        >
          <p>Created {formatTime(robot.creation_time)}; the duration counts from then.</p>
          <label class="check">
            <input type="checkbox" checked={never} onChange={(e) => setNever((e.target as HTMLInputElement).checked)} /> Never expires
          </label>
          <label for="re-days">Expires after (days from creation)</label>
          <input id="re-days" type="number" min="1" max="36500" required={!never} disabled={never} value={days} onInput={(e) => setDays((e.target as HTMLInputElement).value)} />
          <p role="status">
            Expires: <strong>{preview?.text}</strong>
            {preview?.past && <span class="badge bad">already passed: the robot will be refused</span>}
          </p>
          <FormError msg={err} />
          <FormButtons onCancel={onClose} submit="Save" />
        </form>
      )}
    </Dialog>
  );
}

function NewRobot(props: { project: Project; perms: Perms; open: boolean; onClose: () => void; onCreated: (s: { name: string; secret: string }) => void }) {
  const grantable = props.perms.grantable(ROBOT_PERMISSIONS);
  const [name, setName] = useState("");
  const [days, setDays] = useState("30");
  const [picked, setPicked] = useState<Set<string>>(new Set(["repository:pull"]));
  const [err, setErr] = useState("");
  const toggle = (k: string) => {
    const n = new Set(picked);
    if (n.has(k)) n.delete(k);
    else n.add(k);
    setPicked(n);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr("");
    try {
      const access = grantable.filter((p) => picked.has(`${p.resource}:${p.action}`));
      const r = await send("POST", "/robots", {
        name,
        level: "project",
        duration: Number(days),
        permissions: [{ kind: "project", namespace: props.project.name, access }],
      });
      const j = await r.json();
      props.onClose();
      setName("");
      props.onCreated({ name: j.name, secret: j.secret });
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <Dialog title="New robot account" open={props.open} onClose={props.onClose}>
      <form class="form" onSubmit={submit}>
        <label for="nr-name">Name</label>
        <input id="nr-name" required pattern="[a-z0-9._\-]+" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="nr-days">Expires after (days, -1 for never)</label>
        <input id="nr-days" type="number" min="-1" max="36500" value={days} onInput={(e) => setDays((e.target as HTMLInputElement).value)} />
        <fieldset>
          <legend>Permissions (only those you hold yourself)</legend>
          <div class="perm-grid">
            {grantable.map((p) => {
              const k = `${p.resource}:${p.action}`;
              return (
                <label class="check">
                  <input type="checkbox" checked={picked.has(k)} onChange={() => toggle(k)} /> {p.resource} {p.action}
                </label>
              );
            })}
          </div>
        </fieldset>
        <FormError msg={err} />
        <FormButtons onCancel={props.onClose} submit="Create" />
      </form>
    </Dialog>
  );
}

/** A robot's secret: shown once, with copy and download as JSON. */
function SecretOnce({ value, onClose }: { value: { name: string; secret: string } | null; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  const href = value ? URL.createObjectURL(new Blob([JSON.stringify(value, null, 2)], { type: "application/json" })) : "";
  return (
    <Dialog title="Robot secret — shown only once" open={value != null} onClose={onClose}>
      {value && (
        <div class="form">
          <p>
            Save the secret of <code>{value.name}</code> now: Berth keeps only its hash.
          </p>
          <label for="robot-secret">Secret</label>
          <input id="robot-secret" readOnly value={value.secret} class="mono" />
          <div class="actions">
            <button type="button" class="btn" onClick={async () => setCopied(await copyText(value.secret))}>
              {copied ? "Copied" : "Copy"}
            </button>
            <a class="btn" href={href} download={`${value.name.replace(/[^a-zA-Z0-9._+-]/g, "_")}.json`}>
              Download JSON
            </a>
            <button type="button" class="btn primary" onClick={onClose}>
              Done
            </button>
          </div>
        </div>
      )}
    </Dialog>
  );
}

interface AuditRow {
  id: number;
  username: string;
  resource: string;
  resource_type: string;
  operation: string;
  op_time: string;
}

export function auditColumns() {
  return [
    { label: "Time", render: (r: AuditRow) => <time dateTime={r.op_time}>{formatTime(r.op_time)}</time> },
    { label: "User", render: (r: AuditRow) => r.username || "anonymous" },
    { label: "Operation", render: (r: AuditRow) => r.operation },
    { label: "Type", render: (r: AuditRow) => r.resource_type },
    { label: "Resource", render: (r: AuditRow) => <span class="wrap">{r.resource}</span> },
  ];
}

function Logs({ project }: { project: Project }) {
  return (
    <PagedTable<AuditRow>
      label="Project log"
      searchLabel="Filter by operation (push, pull, delete…)"
      rowKey={(r) => r.id}
      fetch={(s) => list<AuditRow>(listUrl(`/projects/${encodeURIComponent(project.name)}/logs`, { page: s.page, pageSize: s.pageSize, q: s.q ? { operation: s.q } : undefined }))}
      empty="Nothing has happened here yet."
      columns={auditColumns()}
    />
  );
}

function Settings({ project, perms, onSaved }: { project: Project; perms: Perms; onSaved: () => void }) {
  const editable = perms.can("project", "update");
  const [pub, setPub] = useState(project.metadata.public === "true");
  const [isa, setIsa] = useState(project.metadata.isa_policy ?? "off");
  const [scan, setScan] = useState(project.metadata.isa_require_scan_pass === "true");
  const [sqfs, setSqfs] = useState(project.metadata.hpc_squashfs ?? "off");
  const [sqfsTags, setSqfsTags] = useState(project.metadata.hpc_squashfs_tags ?? "");
  const proxied = project.registry_id != null;
  const sp = project.metadata.proxy_speed_kb;
  const [speed, setSpeed] = useState(sp && sp !== "-1" ? sp : "");
  const upstream = useLoad(proxied ? `endpoint-${project.registry_id}` : null, () => get<Endpoint>(`/registries/${project.registry_id}`));
  const [msg, setMsg] = useState("");
  const [err, setErr] = useState("");
  const save = async (e: Event) => {
    e.preventDefault();
    setErr("");
    setMsg("");
    const metadata: Record<string, string> = {
      public: String(pub),
      isa_policy: isa,
      isa_require_scan_pass: String(scan),
      hpc_squashfs: sqfs,
      hpc_squashfs_tags: sqfsTags.trim(),
    };
    if (proxied) {
      const r = parseSpeed(speed);
      if ("error" in r) {
        setErr(r.error);
        return;
      }
      metadata.proxy_speed_kb = r.value;
    }
    try {
      await send("PUT", `/projects/${encodeURIComponent(project.name)}`, { metadata });
      setMsg("Saved.");
      onSaved();
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  const del = async () => {
    setErr("");
    try {
      const d = await get<{ deletable: boolean; message?: string }>(`/projects/${encodeURIComponent(project.name)}/_deletable`);
      if (!d.deletable) {
        setErr(d.message ?? "This project cannot be deleted now.");
        return;
      }
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
      return;
    }
    if (!confirm(`Delete project ${project.name}?`)) return;
    try {
      await send("DELETE", `/projects/${encodeURIComponent(project.name)}`);
      navigate("/projects");
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <form class="form settings" onSubmit={save}>
      <p>
        Owner {project.owner_name || "—"} · created{" "}
        {formatTime(project.creation_time)}
      </p>
      {proxied && (
        <>
          <p>
            Proxy cache of{" "}
            {upstream.data ? (
              <strong>
                {upstream.data.name} ({upstream.data.url})
              </strong>
            ) : (
              `registry ${project.registry_id}`
            )}
            : pulls of what is missing fetch it from there; pushes are refused.
          </p>
          <label for="ps-speed">Upstream bandwidth limit in KiB/s (empty: no limit)</label>
          <input id="ps-speed" inputMode="numeric" disabled={!editable} value={speed} onInput={(e) => setSpeed((e.target as HTMLInputElement).value)} />
        </>
      )}
      <label class="check">
        <input type="checkbox" disabled={!editable} checked={pub} onChange={(e) => setPub((e.target as HTMLInputElement).checked)} /> Public: anyone may pull
      </label>
      <label for="ps-isa">ISA policy for pushed indexes</label>
      <select id="ps-isa" disabled={!editable} value={isa} onChange={(e) => setIsa((e.target as HTMLSelectElement).value)}>
        <option value="off">off</option>
        <option value="warn">warn</option>
        <option value="strict">strict</option>
      </select>
      <label class="check">
        <input type="checkbox" disabled={!editable} checked={scan} onChange={(e) => setScan((e.target as HTMLInputElement).checked)} /> Serve only variants whose ISA scan
        passed
      </label>
      <label for="ps-sqfs">HPC squashfs: flatten each image once for Slurm, Apptainer, enroot</label>
      <select id="ps-sqfs" disabled={!editable} value={sqfs} onChange={(e) => setSqfs((e.target as HTMLSelectElement).value)} aria-describedby="ps-sqfs-help">
        <option value="off">off</option>
        <option value="push">on push</option>
        <option value="pull">on first request</option>
      </select>
      <p id="ps-sqfs-help" class="muted">
        Each image (each ISA variant of an index) becomes one squashfs, stored as a referrer and published on the shared file system when the
        registry has one.
      </p>
      <label for="ps-sqfs-tags">Only tags matching (doublestar pattern, empty: all)</label>
      <input id="ps-sqfs-tags" disabled={!editable || sqfs === "off"} value={sqfsTags} placeholder="v*" onInput={(e) => setSqfsTags((e.target as HTMLInputElement).value)} />
      {msg && <p role="status">{msg}</p>}
      <FormError msg={err} />
      {editable && (
        <div class="actions">
          <button type="submit" class="btn primary">
            Save
          </button>
          {perms.can("project", "delete") && (
            <button type="button" class="btn danger" onClick={del}>
              Delete project
            </button>
          )}
        </div>
      )}
    </form>
  );
}
