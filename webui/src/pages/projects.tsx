// Projects: search, paging, public/private, repository count, your role; create (admins, or everyone when the
// server allows it).
import { useState } from "preact/hooks";
import { ApiError, get, list, send } from "../api";
import { formatTime, roleName } from "../format";
import { listUrl } from "../query";
import { parseSpeed } from "../proxy";
import { LIMIT_UNITS, type LimitUnit, parseLimit } from "../quota";
import { loc, navigate, setSearch } from "../router";
import { me } from "../session";
import { Dialog } from "../ui/dialog";
import { FormButtons, FormError, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";
import { ProjectQuota } from "./quotas";

export interface Project {
  project_id: number;
  name: string;
  owner_name: string;
  creation_time: string;
  update_time: string;
  repo_count: number;
  current_user_role_id: number;
  /** a proxy cache: the registry endpoint it pulls from (null: an ordinary project) */
  registry_id?: number | null;
  metadata: {
    public: string;
    isa_policy?: string;
    isa_require_scan_pass?: string;
    retention_id?: string | null;
    /** the HPC squashfs gateway: off | push | pull, and an optional doublestar tag pattern */
    hpc_squashfs?: string;
    hpc_squashfs_tags?: string | null;
    /** a proxy cache's upstream bandwidth cap in KiB/s, "-1": none */
    proxy_speed_kb?: string;
  };
}

/** A registry endpoint, as a proxy cache's upstream */
export interface Endpoint {
  id: number;
  name: string;
  url: string;
}


interface SystemInfo {
  project_creation_restriction: string;
}

export function ProjectsPage() {
  const u = me.value;
  const sys = useLoad("systeminfo", () => get<SystemInfo>("/systeminfo"));
  const canCreate = !!u && (u.sysadmin_flag || sys.data?.project_creation_restriction === "everyone");
  const [open, setOpen] = useState(false);
  // the access filter is part of the URL like the rest of the list state
  const access = new URLSearchParams(loc.value.search).get("public") ?? "";
  const setAccess = (v: string) => {
    const n = new URLSearchParams(loc.value.search);
    if (v) n.set("public", v);
    else n.delete("public");
    n.delete("page");
    setSearch(n.toString() ? "?" + n.toString() : "");
  };
  return (
    <>
      <div class="page-head">
        <h1>Projects</h1>
        {canCreate && (
          <button type="button" class="btn primary" onClick={() => setOpen(true)}>
            New project
          </button>
        )}
      </div>
      {!u && <p class="muted">You are not signed in: these are the public projects, read-only.</p>}
      <PagedTable<Project>
        label="Projects"
        searchLabel="Search projects"
        defaultSort="name"
        rowKey={(p) => p.project_id}
        fetch={(s) => list<Project>(listUrl("/projects", { page: s.page, pageSize: s.pageSize, sort: s.sort, q: { name: s.q ? "~" + s.q : "", public: access } }))}
        toolbar={
          <label>
            Access{" "}
            <select value={access} onChange={(e) => setAccess((e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              <option value="true">public</option>
              <option value="false">private</option>
            </select>
          </label>
        }
        empty={canCreate ? "No projects yet. Create the first one." : "No projects you can see."}
        columns={[
          { label: "Name", sort: "name", render: (p) => <a href={`/projects/${encodeURIComponent(p.name)}`}>{p.name}</a> },
          {
            label: "Access",
            render: (p) => <span class={`badge ${p.metadata.public === "true" ? "ok" : ""}`}>{p.metadata.public === "true" ? "Public" : "Private"}</span>,
          },
          { label: "Your role", render: (p) => (p.current_user_role_id ? roleName(p.current_user_role_id) : u?.sysadmin_flag ? "System admin" : "—") },
          { label: "Repositories", sort: "repo_count", class: "num", render: (p) => p.repo_count },
          { label: "Storage", class: "num", render: (p) => <ProjectStorage name={p.name} /> },
          { label: "ISA policy", render: (p) => p.metadata.isa_policy ?? "off" },
          { label: "Created", sort: "creation_time", render: (p) => <time dateTime={p.creation_time}>{formatTime(p.creation_time)}</time> },
        ]}
      />
      <CreateProject open={open} onClose={() => setOpen(false)} />
    </>
  );
}

/** Storage used against the limit, from the project's summary: one small request per row shown, never for the whole list. */
function ProjectStorage({ name }: { name: string }) {
  return <ProjectQuota project={name} compact />;
}

function CreateProject({ open, onClose }: { open: boolean; onClose: () => void }) {
  const [name, setName] = useState("");
  const [pub, setPub] = useState(false);
  const [isa, setIsa] = useState("off");
  const [limit, setLimit] = useState("");
  const [unit, setUnit] = useState<LimitUnit>("GiB");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const [proxy, setProxy] = useState(false);
  const [registry, setRegistry] = useState("");
  const [speed, setSpeed] = useState("");
  const admin = !!me.value?.sysadmin_flag; // only a system admin's storage_limit counts (Harbor): others get the default
  // a proxy cache pulls with an endpoint's credentials: endpoints, and so proxy projects, are the system admin's
  const endpoints = useLoad(admin && open ? "endpoints" : null, () => list<Endpoint>("/registries?page_size=100"));
  // a value edited after a refusal makes the refusal stale: it goes, and the next submit checks again
  const edited = (set: (v: string) => void, e: Event) => {
    set((e.target as HTMLInputElement).value);
    setErr("");
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr("");
    const meta: Record<string, string> = { public: String(pub), isa_policy: isa };
    let registry_id: number | undefined;
    if (admin && proxy) {
      if (registry === "") {
        setErr("Choose the registry this project caches.");
        return;
      }
      const sp = parseSpeed(speed);
      if ("error" in sp) {
        setErr(sp.error);
        return;
      }
      registry_id = Number(registry);
      meta.proxy_speed_kb = sp.value;
    }
    let storage_limit: number | undefined;
    if (admin && limit.trim() !== "") {
      const r = parseLimit(limit, unit);
      if ("error" in r) {
        setErr(r.error);
        return;
      }
      storage_limit = r.bytes;
    }
    setBusy(true);
    try {
      await send("POST", "/projects", { project_name: name, metadata: meta, storage_limit, registry_id });
      if (isa !== "off") await send("PUT", `/projects/${encodeURIComponent(name)}`, { metadata: { isa_policy: isa } });
      onClose();
      navigate(`/projects/${encodeURIComponent(name)}`);
    } catch (x) {
      setErr(x instanceof ApiError && x.status === 409 ? `A project named “${name}” already exists.` : x instanceof Error ? x.message : String(x));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title="New project" open={open} onClose={onClose}>
      <form onSubmit={submit} class="form">
        <label for="np-name">Name</label>
        <input
          id="np-name"
          required
          pattern="[a-z0-9]+(?:[._\-][a-z0-9]+)*"
          title="lowercase letters and digits, separated by single . _ or -"
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <label class="check">
          <input type="checkbox" checked={pub} onChange={(e) => setPub((e.target as HTMLInputElement).checked)} /> Public (anyone may pull)
        </label>
        <label for="np-isa">ISA policy</label>
        <select id="np-isa" value={isa} onChange={(e) => setIsa((e.target as HTMLSelectElement).value)}>
          <option value="off">off — no checks</option>
          <option value="warn">warn — push succeeds with warnings</option>
          <option value="strict">strict — refuse inconsistent ISA indexes</option>
        </select>
        {admin && (
          <>
            <label for="np-limit">Storage limit (empty: the registry's default)</label>
            <span class="inline">
              <input id="np-limit" inputMode="decimal" value={limit} onInput={(e) => edited(setLimit, e)} />
              <select aria-label="Storage limit unit" value={unit} onChange={(e) => setUnit((e.target as HTMLSelectElement).value as LimitUnit)}>
                {LIMIT_UNITS.map((u) => (
                  <option value={u}>{u}</option>
                ))}
              </select>
            </span>
          </>
        )}
        {admin && (
          <>
            <label class="check">
              <input type="checkbox" checked={proxy} onChange={(e) => setProxy((e.target as HTMLInputElement).checked)} /> Proxy cache: pulls of
              what is missing fetch it from another registry (pushes are refused)
            </label>
            {proxy && (
              <>
                <label for="np-registry">Upstream registry</label>
                <select id="np-registry" required value={registry} onChange={(e) => setRegistry((e.target as HTMLSelectElement).value)}>
                  <option value="">{endpoints.data?.items.length === 0 ? "— no registries: add one under Administration —" : "— choose —"}</option>
                  {(endpoints.data?.items ?? []).map((r) => (
                    <option value={String(r.id)}>
                      {r.name} ({r.url})
                    </option>
                  ))}
                </select>
                <label for="np-speed">Upstream bandwidth limit in KiB/s (empty: no limit)</label>
                <input id="np-speed" inputMode="numeric" value={speed} onInput={(e) => edited(setSpeed, e)} />
              </>
            )}
          </>
        )}
        <FormError msg={err} />
        <FormButtons onCancel={onClose} submit="Create" busy={busy} />
      </form>
    </Dialog>
  );
}
