// A project's webhooks tab: policies (create, enable/disable, delete; the signing secret shown once) and each
// policy's recent deliveries with their attempts, and redelivery of a finished one (same event id).
import { useState } from "preact/hooks";
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
      <NewWebhook
        base={base}
        open={open}
        onClose={() => setOpen(false)}
        onCreated={(s) => {
          setSecret(s);
          setTick((t) => t + 1);
        }}
      />
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

function NewWebhook(props: { base: string; open: boolean; onClose: () => void; onCreated: (s: { name: string; secret: string }) => void }) {
  const [name, setName] = useState("");
  const [address, setAddress] = useState("");
  const [format, setFormat] = useState("Default");
  const [auth, setAuth] = useState("");
  const [skip, setSkip] = useState(false);
  const [events, setEvents] = useState<Set<string>>(new Set(["PUSH_ARTIFACT"]));
  const { err, setErr, act } = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    if (!webhookAddressOk(address)) return setErr("The address must be an http:// or https:// URL.");
    if (events.size === 0) return setErr("Choose at least one event.");
    act(async () => {
      const r = await send("POST", props.base, {
        name,
        enabled: true,
        event_types: WEBHOOK_EVENTS.filter((t) => events.has(t)),
        targets: [{ type: "http", address, auth_header: auth, skip_cert_verify: skip, payload_format: format }],
      });
      const j = await r.json();
      props.onCreated({ name, secret: j.secret });
      setName("");
      setAddress("");
      setAuth("");
      props.onClose();
    });
  };
  return (
    <Dialog title="New webhook" open={props.open} onClose={props.onClose}>
      <form class="form" onSubmit={submit}>
        <label for="wh-name">Name</label>
        <input id="wh-name" required maxLength={256} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="wh-address">Endpoint URL (http or https)</label>
        <input id="wh-address" required type="url" placeholder="https://ci.example/hooks/berth" value={address} onInput={(e) => setAddress((e.target as HTMLInputElement).value)} />
        <label for="wh-format">Payload format</label>
        <select id="wh-format" value={format} onChange={(e) => setFormat((e.target as HTMLSelectElement).value)}>
          <option value="Default">Default (Harbor)</option>
          <option value="CloudEvents">CloudEvents 1.0</option>
        </select>
        <label for="wh-auth">Authorization header (optional)</label>
        <input id="wh-auth" autoComplete="off" value={auth} onInput={(e) => setAuth((e.target as HTMLInputElement).value)} />
        <label class="check">
          <input type="checkbox" checked={skip} onChange={(e) => setSkip((e.target as HTMLInputElement).checked)} /> Skip certificate verification
        </label>
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
        <FormButtons onCancel={props.onClose} submit="Create" />
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
