// A project's webhooks tab: policies (create, edit, enable/disable, delete; the signing secret shown once) and each
// policy's recent deliveries with their attempts, and redelivery of a finished one (same event id).
import { useRef, useState } from "preact/hooks";
import { get, list, send } from "../api";
import { formatTime } from "../format";
import type { Perms } from "../perms";
import { listUrl } from "../query";
import { copyText, Dialog } from "../ui/dialog";
import { FormButtons, FormError, useAction } from "../ui/states";
import { PagedTable } from "../ui/table";
import type { Project } from "./projects";

export const WEBHOOK_EVENTS = [
  "PUSH_ARTIFACT",
  "PULL_ARTIFACT",
  "DELETE_ARTIFACT",
  "QUOTA_EXCEED",
  "QUOTA_WARNING",
  "TAG_RETENTION",
  "REPLICATION",
  "ISA_SCAN_COMPLETED",
];

interface Target {
  type: string;
  address: string;
  auth_header: string;
  skip_cert_verify: boolean;
  payload_format: string;
}

export interface WebhookPolicy {
  id: number;
  name: string;
  description: string;
  enabled: boolean;
  event_types: string[];
  targets: Target[];
  creator: string;
  update_time: string;
}

interface Execution {
  id: number;
  status: string;
  start_time: string;
  end_time: string | null;
  extra_attrs: { event_type: string; event_id: string; repository?: string; tag?: string; digest?: string };
}

interface Task {
  id: number;
  status: string;
  run_count: number;
  status_message: string;
  extra_attrs: { next_attempt?: string | null };
}

/** A webhook address the server accepts: http or https with a host. */
export function webhookAddressOk(a: string): boolean {
  return /^https?:\/\/[^\s/]+/i.test(a);
}

function statusBadge(s: string) {
  return <span class={`badge ${s === "Success" ? "ok" : s === "Error" ? "bad" : ""}`}>{s}</span>;
}

export function Webhooks({ project, perms }: { project: Project; perms: Perms }) {
  const [tick, setTick] = useState(0);
  const [open, setOpen] = useState(false);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const [shown, setShown] = useState<WebhookPolicy | null>(null);
  const [editing, setEditing] = useState<WebhookPolicy | null>(null);
  const editButton = useRef<HTMLElement | null>(null); // focus goes back to it when the edit dialog closes
  const closeEdit = () => {
    setEditing(null);
    requestAnimationFrame(() => editButton.current?.isConnected && editButton.current.focus());
  };
  const { err, act } = useAction(() => setTick((t) => t + 1));
  const base = `/projects/${encodeURIComponent(project.name)}/webhook/policies`;
  const canEdit = perms.can("notification-policy", "update");
  return (
    <>
      <FormError msg={err} />
      <PagedTable<WebhookPolicy>
        label="Webhook policies"
        reloadKey={tick}
        rowKey={(p) => p.id}
        toolbar={
          perms.can("notification-policy", "create") && (
            <button type="button" class="btn primary" onClick={() => setOpen(true)}>
              New webhook
            </button>
          )
        }
        fetch={(s) => list<WebhookPolicy>(listUrl(base, { page: s.page, pageSize: s.pageSize }))}
        empty="No webhooks: nothing is sent when artifacts change."
        columns={[
          { label: "Name", render: (p) => p.name },
          { label: "Status", render: (p) => <span class={`badge ${p.enabled ? "ok" : ""}`}>{p.enabled ? "Enabled" : "Disabled"}</span> },
          { label: "Address", render: (p) => <code>{p.targets[0]?.address}</code> },
          { label: "Format", render: (p) => p.targets[0]?.payload_format },
          { label: "Events", render: (p) => p.event_types.join(", ") },
          {
            label: "Actions",
            render: (p) => (
              <span class="row-actions">
                <button type="button" class="btn" aria-label={`Deliveries of ${p.name}`} onClick={() => setShown(p)}>
                  Deliveries
                </button>
                {canEdit && (
                  <button
                    type="button"
                    class="btn"
                    aria-label={`Edit ${p.name}`}
                    onClick={(e) => {
                      editButton.current = e.currentTarget as HTMLElement;
                      setEditing(p);
                    }}
                  >
                    Edit
                  </button>
                )}
                {canEdit && (
                  <button type="button" class="btn" onClick={() => act(() => send("PUT", `${base}/${p.id}`, { enabled: !p.enabled }))}>
                    {p.enabled ? "Disable" : "Enable"}
                  </button>
                )}
                {perms.can("notification-policy", "delete") && (
                  <button type="button" class="btn danger" onClick={() => confirm(`Delete the webhook ${p.name}?`) && act(() => send("DELETE", `${base}/${p.id}`))}>
                    Delete
                  </button>
                )}
              </span>
            ),
          },
        ]}
      />
      {shown && <Deliveries base={`${base}/${shown.id}`} policy={shown} canRetry={canEdit} onClose={() => setShown(null)} />}
      <WebhookDialog
        base={base}
        open={open}
        onClose={() => setOpen(false)}
        onSaved={(s) => {
          setSecret(s ?? null);
          setTick((t) => t + 1);
        }}
      />
      {editing && (
        <WebhookDialog
          key={editing.id}
          base={base}
          policy={editing}
          open
          onClose={closeEdit}
          onSaved={() => setTick((t) => t + 1)}
        />
      )}
      <Dialog title="Signing secret — shown only once" open={secret != null} onClose={() => setSecret(null)}>
        {secret && (
          <div class="form">
            <p>
              Every delivery of <code>{secret.name}</code> carries <code>X-Berth-Signature: sha256=HMAC(secret, timestamp.body)</code>. Give this
              secret to the receiver now: Berth shows it only once.
            </p>
            <label for="wh-secret">Secret</label>
            <input id="wh-secret" readOnly value={secret.secret} class="mono" />
            <div class="actions">
              <button type="button" class="btn" onClick={() => copyText(secret.secret)}>
                Copy
              </button>
              <button type="button" class="btn primary" onClick={() => setSecret(null)}>
                Done
              </button>
            </div>
          </div>
        )}
      </Dialog>
    </>
  );
}

/** The body of a POST or PUT: the form's first target; a policy's other targets (the API allows eight) kept as they are. */
export function webhookBody(
  f: { name: string; description: string; enabled: boolean; events: Set<string>; address: string; auth: string; skip: boolean; format: string },
  rest: Target[] = [],
) {
  return {
    name: f.name,
    description: f.description,
    enabled: f.enabled,
    event_types: WEBHOOK_EVENTS.filter((t) => f.events.has(t)),
    targets: [{ type: "http", address: f.address, auth_header: f.auth, skip_cert_verify: f.skip, payload_format: f.format }, ...rest],
  };
}

/** The stored auth header is never sent back: the API answers "*****", and "*****" in a PUT keeps it. */
const KEEP_AUTH = "*****";

/** New webhook (no `policy`), or edit `policy` with PUT (Harbor's UpdateWebhookPolicyOfProject). */
function WebhookDialog(props: {
  base: string;
  policy?: WebhookPolicy;
  open: boolean;
  onClose: () => void;
  onSaved: (created?: { name: string; secret: string }) => void;
}) {
  const p = props.policy;
  const t0 = p?.targets[0];
  const id = p ? "whe" : "wh";
  const [name, setName] = useState(p?.name ?? "");
  const [description, setDescription] = useState(p?.description ?? "");
  const [enabled, setEnabled] = useState(p?.enabled ?? true);
  const [address, setAddress] = useState(t0?.address ?? "");
  const [format, setFormat] = useState(t0?.payload_format || "Default");
  const [auth, setAuth] = useState(t0?.auth_header ?? "");
  const [skip, setSkip] = useState(t0?.skip_cert_verify ?? false);
  const [events, setEvents] = useState<Set<string>>(new Set(p?.event_types ?? ["PUSH_ARTIFACT"]));
  const { err, setErr, act } = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    if (!webhookAddressOk(address)) return setErr("The address must be an http:// or https:// URL.");
    if (events.size === 0) return setErr("Choose at least one event.");
    act(async () => {
      const body = webhookBody({ name, description, enabled, events, address, auth, skip, format }, p?.targets.slice(1));
      if (p) {
        await send("PUT", `${props.base}/${p.id}`, body);
        props.onSaved();
      } else {
        const j = await (await send("POST", props.base, body)).json();
        props.onSaved({ name, secret: j.secret });
        setName("");
        setDescription("");
        setAddress("");
        setAuth("");
      }
      props.onClose();
    });
  };
  const text = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
  return (
    <Dialog title={p ? `Edit webhook ${p.name}` : "New webhook"} open={props.open} onClose={props.onClose}>
      {/* any edit clears the last refusal: it spoke of the values before the edit */}
      <form class="form" onSubmit={submit} onInput={() => err && setErr("")}>
        <label for={`${id}-name`}>Name</label>
        <input id={`${id}-name`} required maxLength={256} value={name} onInput={text(setName)} />
        <label for={`${id}-description`}>Description (optional)</label>
        <input id={`${id}-description`} maxLength={4096} value={description} onInput={text(setDescription)} />
        <label for={`${id}-address`}>Endpoint URL (http or https)</label>
        <input id={`${id}-address`} required type="url" placeholder="https://ci.example/hooks/berth" value={address} onInput={text(setAddress)} />
        <label for={`${id}-format`}>Payload format</label>
        <select id={`${id}-format`} value={format} onChange={(e) => setFormat((e.target as HTMLSelectElement).value)}>
          <option value="Default">Default (Harbor)</option>
          <option value="CloudEvents">CloudEvents 1.0</option>
        </select>
        <label for={`${id}-auth`}>Authorization header (optional)</label>
        <input
          id={`${id}-auth`}
          autoComplete="off"
          value={auth}
          aria-describedby={p && t0?.auth_header === KEEP_AUTH ? `${id}-auth-hint` : undefined}
          onInput={text(setAuth)}
        />
        {p && t0?.auth_header === KEEP_AUTH && (
          <p id={`${id}-auth-hint`} class="hint">
            A header is stored and not shown: leave {KEEP_AUTH} to keep it, empty the field to remove it.
          </p>
        )}
        <label class="check">
          <input type="checkbox" checked={skip} onChange={(e) => setSkip((e.target as HTMLInputElement).checked)} /> Skip certificate verification
        </label>
        {p && (
          <label class="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled((e.target as HTMLInputElement).checked)} /> Enabled
          </label>
        )}
        <fieldset>
          <legend>Events</legend>
          {WEBHOOK_EVENTS.map((t) => (
            <label class="check">
              <input
                type="checkbox"
                checked={events.has(t)}
                onChange={(e) => {
                  const s = new Set(events);
                  (e.target as HTMLInputElement).checked ? s.add(t) : s.delete(t);
                  setEvents(s);
                }}
              />{" "}
              {t}
            </label>
          ))}
        </fieldset>
        <FormError msg={err} />
        <FormButtons onCancel={props.onClose} submit={p ? "Save" : "Create"} />
      </form>
    </Dialog>
  );
}

function Deliveries({ base, policy, canRetry, onClose }: { base: string; policy: WebhookPolicy; canRetry: boolean; onClose: () => void }) {
  const [tick, setTick] = useState(0);
  const [log, setLog] = useState<string | null>(null);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  const showLog = (e: Execution) =>
    act(async () => {
      const tasks = await get<Task[]>(`${base}/executions/${e.id}/tasks`);
      const lines = await Promise.all(tasks.map((t) => send("GET", `${base}/executions/${e.id}/tasks/${t.id}/log`).then((r) => r.text())));
      setLog(lines.join("\n") || "No attempt yet.");
    });
  return (
    <section aria-label={`Deliveries of ${policy.name}`}>
      <h2>Recent deliveries of {policy.name}</h2>
      <FormError msg={err} />
      <PagedTable<Execution>
        label={`Deliveries of ${policy.name}`}
        reloadKey={tick}
        rowKey={(x) => x.id}
        toolbar={
          <>
            <button type="button" class="btn" onClick={() => setTick((t) => t + 1)}>
              Refresh
            </button>
            <button type="button" class="btn" onClick={onClose}>
              Close
            </button>
          </>
        }
        fetch={(s) => list<Execution>(listUrl(`${base}/executions`, { page: s.page, pageSize: s.pageSize }))}
        empty="Nothing delivered yet."
        columns={[
          { label: "Event", render: (x) => x.extra_attrs.event_type },
          { label: "Artifact", render: (x) => [x.extra_attrs.repository, x.extra_attrs.tag ?? x.extra_attrs.digest?.slice(0, 19)].filter(Boolean).join(":") },
          { label: "Status", render: (x) => statusBadge(x.status) },
          { label: "Time", render: (x) => formatTime(x.start_time) },
          { label: "Event id", render: (x) => <code>{x.extra_attrs.event_id}</code> },
          {
            label: "Actions",
            render: (x) => (
              <span class="row-actions">
                <button type="button" class="btn" onClick={() => showLog(x)}>
                  Attempts
                </button>
                {canRetry && x.status !== "Running" && (
                  <button type="button" class="btn" onClick={() => act(() => send("POST", `${base}/executions/${x.id}/retry`))}>
                    Redeliver
                  </button>
                )}
              </span>
            ),
          },
        ]}
      />
      <Dialog title="Delivery attempts" open={log != null} onClose={() => setLog(null)}>
        <pre class="mono" tabIndex={0} aria-label="Attempts, one per line">{log}</pre>
        <div class="actions">
          <button type="button" class="btn primary" onClick={() => setLog(null)}>
            Close
          </button>
        </div>
      </Dialog>
    </section>
  );
}
