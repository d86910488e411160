// One artifact: summary, pull commands pinned by digest, tags, platforms, the ISA variant table with scan
// verdicts and the "which build does my node get?" panel, layers and config, annotations, referrers.
import { useState } from "preact/hooks";
import { call, get, list, send } from "../api";
import { formatBytes, formatTime, shortDigest } from "../format";
import { listUrl, repoSegment } from "../query";
import { CopyButton } from "../ui/dialog";
import { ErrorBox, FormError, Loading, useAction, useLoad } from "../ui/states";
import { PagedTable } from "../ui/table";
import { useProjectPerms } from "./project";
import type { Project } from "./projects";
import { SquashfsSection } from "./squashfs";
import { type Artifact, CopyDigest, type ImageAttrs, platformText } from "./repository";

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
  annotations?: Record<string, string>;
  artifactType?: string;
}
interface Manifest {
  mediaType?: string;
  config?: Descriptor;
  layers?: Descriptor[];
  manifests?: Descriptor[];
  annotations?: Record<string, string>;
  subject?: Descriptor;
}
interface ScanFile {
  path: string;
  status: string;
  max_level: string;
  reason: string;
  evidence: { function: string; mnemonic: string; isa_set: string; offset: number }[];
}
interface Variant {
  position: number;
  digest: string;
  architecture: string;
  variant: string | null;
  level: string;
  features: string;
  target: string | null;
  scan_status: string;
  scan_max_level: string | null;
  scan_files: ScanFile[] | null;
}

/** One entry of an image config's history (additions/build_history) */
export interface HistoryEntry {
  created?: string;
  created_by?: string;
  author?: string;
  comment?: string;
  empty_layer?: boolean;
}
export interface HistoryRow {
  step: number;
  created: string | null;
  command: string;
  comment: string;
  /** the layer this step made (index into the manifest's layers), or null for a step that made none */
  layer: number | null;
}

/**
 * Build history rows: the command without the shell wrapper Docker's builder records ("/bin/sh -c #(nop) " for
 * metadata steps, "/bin/sh -c " for RUN), and each step that made a layer matched with that layer: the entries
 * that are not empty_layer correspond, in order, to the manifest's layers.
 */
export function historyRows(history: HistoryEntry[], layerCount: number): HistoryRow[] {
  let next = 0;
  return history.map((h, i) => {
    let command = (h.created_by ?? "").trim();
    const nop = /^\/bin\/sh -c #\(nop\)\s*/;
    if (nop.test(command)) command = command.replace(nop, "");
    else if (command.startsWith("/bin/sh -c ")) command = "RUN " + command.slice("/bin/sh -c ".length);
    const layer = h.empty_layer || next >= layerCount ? null : next++;
    return { step: i + 1, created: h.created ?? null, command, comment: h.comment ?? "", layer };
  });
}

/** Entrypoint/Cmd as a reader would type them: words joined, those with spaces or quotes JSON-quoted */
export function commandLine(argv: string[] | null | undefined): string {
  if (!argv || argv.length === 0) return "";
  return argv.map((w) => (w === "" || /[\s"'\\$]/.test(w) ? JSON.stringify(w) : w)).join(" ");
}

/** Pull commands for every client Berth's users run, all pinned by digest. */
export function pullCommands(host: string, repo: string, digest: string): [string, string][] {
  const ref = `${host}/${repo}@${digest}`;
  return [
    ["docker", `docker pull ${ref}`],
    ["podman", `podman pull ${ref}`],
    ["skopeo", `skopeo copy docker://${ref} oci:./${repo.split("/").pop()}:pinned`],
    ["containerd (ctr)", `ctr images pull ${ref}`],
    ["enroot", `enroot import 'docker://${host}#${repo}@${digest}'`],
    ["pyxis (Slurm)", `srun --container-image='${host}#${repo}@${digest}' …`],
    ["Apptainer", `apptainer pull docker://${ref}`],
  ];
}

function Copyable({ text, label }: { text: string; label: string }) {
  return (
    <div class="copyable">
      <code>{text}</code>
      <CopyButton text={text} label={label} />
    </div>
  );
}

const ACCESSORY_NAMES: Record<string, string> = {
  "application/vnd.berth.isa.scan.v1+json": "ISA scan report",
  "application/vnd.berth.rootfs.squashfs.v1": "HPC squashfs",
  "application/vnd.dev.cosign.artifact.sig.v1+json": "cosign signature",
  "application/vnd.cncf.notary.signature": "Notation signature",
  "application/spdx+json": "SBOM (SPDX)",
  "application/vnd.cyclonedx+json": "SBOM (CycloneDX)",
};

export function ArtifactPage({ project, repo, reference }: { project: string; repo: string; reference: string }) {
  const base = `/projects/${encodeURIComponent(project)}/repositories/${repoSegment(repo)}/artifacts/${encodeURIComponent(reference)}`;
  const art = useLoad(`art|${base}`, () => get<Artifact>(base));
  const man = useLoad(`man|${base}`, () => get<Manifest>(`${base}/manifest`));
  const perms = useProjectPerms(project);
  const proj = useLoad(`project|${project}`, () => get<Project>(`/projects/${encodeURIComponent(project)}`));
  if (art.error) return <ErrorBox error={art.error} retry={art.reload} />;
  if (!art.data || !perms.data) return <Loading />;
  const a = art.data;
  const full = `${project}/${repo}`;
  const repoPage = `/projects/${encodeURIComponent(project)}/repositories/${encodeURIComponent(repo)}`;
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/projects">Projects</a> / <a href={`/projects/${encodeURIComponent(project)}`}>{project}</a> / <a href={repoPage}>{repo}</a> /{" "}
        <span>{shortDigest(a.digest)}</span>
      </nav>
      <div class="page-head">
        <h1>
          {full}@{shortDigest(a.digest)}
        </h1>
        {a.isa_variants && <span class="badge ok">ISA index · {a.isa_variants.length} variants</span>}
      </div>
      <div class="grid2">
        <section class="card" aria-labelledby="sum-h">
          <h2 id="sum-h">Summary</h2>
          <dl class="kv">
            <dt>Digest</dt>
            <dd>
              <CopyDigest digest={a.digest} />
            </dd>
            <dt>Media type</dt>
            <dd>{a.media_type}</dd>
            {a.artifact_type && (
              <>
                <dt>Artifact type</dt>
                <dd>{a.artifact_type}</dd>
              </>
            )}
            <dt>Size</dt>
            <dd>{formatBytes(a.size)}</dd>
            <dt>Pushed</dt>
            <dd>{formatTime(a.push_time)}</dd>
            <dt>Last pulled</dt>
            <dd>{a.pull_time ? formatTime(a.pull_time) : "never"}</dd>
          </dl>
        </section>
        <section class="card" aria-labelledby="pull-h">
          <h2 id="pull-h">Pull by digest</h2>
          {pullCommands(location.host, full, a.digest).map(([client, cmd]) => (
            <div class="pull">
              <span class="muted">{client}</span>
              <Copyable text={cmd} label={`${client} command`} />
            </div>
          ))}
        </section>
      </div>
      {(a.squashfs || (a.type === "IMAGE" && !/index|manifest\.list/.test(a.media_type) && ["push", "pull"].includes(proj.data?.metadata.hpc_squashfs ?? "off"))) && (
        <SquashfsSection
          base={base}
          mode={proj.data?.metadata.hpc_squashfs ?? "off"}
          job={a.squashfs ?? null}
          host={location.host}
          repo={full}
          digest={a.digest}
          reload={art.reload}
        />
      )}
      <Tags base={base} canAdd={perms.data.can("tag", "create")} canDelete={perms.data.can("tag", "delete")} onChange={art.reload} />
      {a.isa_variants && <IsaSection base={base} image={`${location.host}/${full}@${a.digest}`} />}
      {a.references && (
        <section aria-labelledby="plat-h">
          <h2 id="plat-h">Platforms</h2>
          <div class="table-wrap">
            <table aria-label="Platforms">
              <thead>
                <tr>
                  <th scope="col">Platform</th>
                  <th scope="col">Manifest</th>
                  <th scope="col">Features</th>
                </tr>
              </thead>
              <tbody>
                {a.references.map((r) => (
                  <tr>
                    <td data-label="Platform">{platformText(r.platform)}</td>
                    <td data-label="Manifest">
                      <a href={`${repoPage}/artifacts/${r.child_digest}`}>{shortDigest(r.child_digest)}</a>
                    </td>
                    <td data-label="Features">{r.annotations?.["io.berth.isa.features"] ?? "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
      <ManifestSection m={man.data} error={man.error} />
      {a.extra_attrs && <ConfigSection attrs={a.extra_attrs} />}
      {a.extra_attrs && <BuildHistory base={base} layers={man.data?.layers ?? []} />}
      {a.annotations && Object.keys(a.annotations).length > 0 && (
        <section aria-labelledby="ann-h">
          <h2 id="ann-h">Annotations</h2>
          <dl class="kv card">
            {Object.entries(a.annotations).map(([k, v]) => (
              <>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </>
            ))}
          </dl>
        </section>
      )}
      <section aria-labelledby="ref-h">
        <h2 id="ref-h">Referrers (signatures, SBOMs, ISA scan reports, squashfs)</h2>
        {a.accessories.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <ul class="plain">
            {a.accessories.map((x) => (
              <li>
                <a href={`${repoPage}/artifacts/${x.digest}`}>{shortDigest(x.digest)}</a> · {ACCESSORY_NAMES[x.artifact_type ?? ""] ?? x.artifact_type ?? "artifact"} ·{" "}
                {formatBytes(x.size)}
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}

function ManifestSection({ m, error }: { m: Manifest | null; error: unknown }) {
  if (error) return <ErrorBox error={error} />;
  if (!m) return <Loading what="Loading manifest" />;
  if (!m.layers) return null;
  return (
    <section aria-labelledby="layers-h">
      <h2 id="layers-h">Layers and config</h2>
      {m.config && (
        <p>
          Config <code title={m.config.digest}>{shortDigest(m.config.digest)}</code> · {m.config.mediaType} · {formatBytes(m.config.size)}
        </p>
      )}
      <div class="table-wrap">
        <table aria-label="Layers">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Digest</th>
              <th scope="col">Media type</th>
              <th scope="col" class="num">
                Size
              </th>
            </tr>
          </thead>
          <tbody>
            {m.layers.map((l, i) => (
              <tr>
                <td data-label="#">{i + 1}</td>
                <td data-label="Digest">
                  <code title={l.digest}>{shortDigest(l.digest)}</code>
                </td>
                <td data-label="Media type" class="wrap">
                  {l.mediaType}
                </td>
                <td data-label="Size" class="num">
                  {formatBytes(l.size)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function ConfigSection({ attrs }: { attrs: ImageAttrs }) {
  const c = attrs.config ?? {};
  const row = (label: string, value: string | null | undefined) =>
    value ? (
      <>
        <dt>{label}</dt>
        <dd>
          <code>{value}</code>
        </dd>
      </>
    ) : null;
  const labels = Object.entries(c.Labels ?? {});
  return (
    <section aria-labelledby="cfg-h">
      <h2 id="cfg-h">Image config</h2>
      <div class="grid2">
        <dl class="kv card" aria-label="Image config">
          <dt>Platform</dt>
          <dd>{[attrs.os, attrs.architecture, attrs.variant].filter(Boolean).join("/") || "unknown"}</dd>
          <dt>Created</dt>
          <dd>{attrs.created ? formatTime(attrs.created) : "—"}</dd>
          {attrs.author && (
            <>
              <dt>Author</dt>
              <dd>{attrs.author}</dd>
            </>
          )}
          {row("Entrypoint", commandLine(c.Entrypoint))}
          {row("Command", commandLine(c.Cmd))}
          {row("Working directory", c.WorkingDir)}
          {row("User", c.User)}
          {row("Ports", Object.keys(c.ExposedPorts ?? {}).join(", "))}
          {row("Volumes", Object.keys(c.Volumes ?? {}).join(", "))}
          {row("Stop signal", c.StopSignal)}
          {!c.Entrypoint?.length && !c.Cmd?.length && (
            <>
              <dt>Command</dt>
              <dd class="muted">none set</dd>
            </>
          )}
        </dl>
        <div class="card">
          <h3>Environment</h3>
          {c.Env?.length ? (
            <ul class="plain env" aria-label="Environment">
              {c.Env.map((e) => (
                <li>
                  <code>{e}</code>
                </li>
              ))}
            </ul>
          ) : (
            <p class="muted">No variables.</p>
          )}
          <h3>Labels</h3>
          {labels.length ? (
            <dl class="kv" aria-label="Labels">
              {labels.map(([k, v]) => (
                <>
                  <dt>{k}</dt>
                  <dd>{v}</dd>
                </>
              ))}
            </dl>
          ) : (
            <p class="muted">No labels.</p>
          )}
        </div>
      </div>
    </section>
  );
}

function BuildHistory({ base, layers }: { base: string; layers: Descriptor[] }) {
  const h = useLoad(`hist|${base}`, () => get<HistoryEntry[]>(`${base}/additions/build_history`));
  return (
    <section aria-labelledby="hist-h">
      <h2 id="hist-h">Build history</h2>
      {h.error ? (
        <ErrorBox error={h.error} retry={h.reload} />
      ) : !h.data ? (
        <Loading what="Loading build history" />
      ) : h.data.length === 0 ? (
        <p class="muted">The image config records no build history.</p>
      ) : (
        <div class="table-wrap">
          <table aria-label="Build history">
            <thead>
              <tr>
                <th scope="col">Step</th>
                <th scope="col">Created</th>
                <th scope="col">Command</th>
                <th scope="col" class="num">
                  Layer
                </th>
              </tr>
            </thead>
            <tbody>
              {historyRows(h.data, layers.length).map((r) => (
                <tr>
                  <td data-label="Step">{r.step}</td>
                  <td data-label="Created" class="nowrap">
                    {r.created ? formatTime(r.created) : "—"}
                  </td>
                  <td data-label="Command" class="wrap">
                    <code>{r.command || "—"}</code>
                    {r.comment && <div class="muted">{r.comment}</div>}
                  </td>
                  <td data-label="Layer" class="num nowrap">
                    {r.layer == null ? <span class="muted">none</span> : `#${r.layer + 1} · ${formatBytes(layers[r.layer].size)}`}
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

function Tags({ base, canAdd, canDelete, onChange }: { base: string; canAdd: boolean; canDelete: boolean; onChange: () => void }) {
  const [tick, setTick] = useState(0);
  const [name, setName] = useState("");
  const { err, act } = useAction(() => {
    setTick((t) => t + 1);
    onChange();
  });
  return (
    <section aria-labelledby="tags-h">
      <h2 id="tags-h">Tags</h2>
      <FormError msg={err} />
      {canAdd && (
        <form
          class="inline-form"
          onSubmit={async (e) => {
            e.preventDefault();
            if (await act(() => send("POST", `${base}/tags`, { name }))) setName("");
          }}
        >
          <label for="new-tag">New tag</label>
          <input id="new-tag" required pattern="[A-Za-z0-9_][A-Za-z0-9._\-]{0,127}" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <button type="submit" class="btn primary">
            Add tag
          </button>
        </form>
      )}
      <PagedTable<{ name: string; push_time: string }>
        label="Tags"
        reloadKey={tick}
        rowKey={(t) => t.name}
        fetch={(s) => list(listUrl(`${base}/tags`, { page: s.page, pageSize: s.pageSize }))}
        empty="No tags: this artifact is reachable by digest only."
        columns={[
          { label: "Tag", render: (t) => <code>{t.name}</code> },
          { label: "Pushed", render: (t) => formatTime(t.push_time) },
          ...(canDelete
            ? [
                {
                  label: "Actions",
                  render: (t: { name: string }) => (
                    <button
                      type="button"
                      class="btn danger"
                      aria-label={`Remove tag ${t.name}`}
                      onClick={() => confirm(`Remove tag ${t.name}?`) && act(() => send("DELETE", `${base}/tags/${encodeURIComponent(t.name)}`))}
                    >
                      Remove
                    </button>
                  ),
                },
              ]
            : []),
        ]}
      />
    </section>
  );
}

function verdictClass(s: string) {
  return s === "pass" ? "ok" : s === "fail" || s === "error" ? "bad" : s === "warn" ? "warn" : "";
}

function IsaSection({ base, image }: { base: string; image: string }) {
  const t = useLoad(`isa|${base}`, () => get<{ index_digest: string; variants: Variant[] }>(`${base}/isa`));
  return (
    <section aria-labelledby="isa-h">
      <h2 id="isa-h">CPU-ISA variants</h2>
      {t.error ? (
        <ErrorBox error={t.error} retry={t.reload} />
      ) : !t.data ? (
        <Loading />
      ) : (
        <div class="table-wrap">
          <table aria-label="ISA variants">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Level</th>
                <th scope="col">Features</th>
                <th scope="col">Tuning target</th>
                <th scope="col">Manifest</th>
                <th scope="col">Scan verdict</th>
              </tr>
            </thead>
            <tbody>
              {t.data.variants.map((v) => (
                <tr>
                  <td data-label="#">{v.position}</td>
                  <td data-label="Level">
                    {v.architecture} {v.level}
                  </td>
                  <td data-label="Features">{v.features || "—"}</td>
                  <td data-label="Tuning target">{v.target || "—"}</td>
                  <td data-label="Manifest">
                    <code title={v.digest}>{shortDigest(v.digest)}</code>
                  </td>
                  <td data-label="Scan verdict">
                    <span class={`badge ${verdictClass(v.scan_status)}`}>{v.scan_status || "pending"}</span>
                    {v.scan_max_level && <span class="muted"> uses up to {v.scan_max_level}</span>}
                    {(v.scan_files ?? [])
                      .filter((f) => f.status !== "pass")
                      .slice(0, 3)
                      .map((f) => (
                        <div class="finding">
                          <code>{f.path}</code>: {f.reason}
                          {f.evidence.slice(0, 2).map((e) => (
                            <div class="muted">
                              <code>{e.mnemonic}</code> ({e.isa_set}) in <code>{e.function || "?"}</code> at 0x{e.offset.toString(16)}
                            </div>
                          ))}
                        </div>
                      ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ResolvePanel image={image} />
    </section>
  );
}

interface Candidate {
  digest: string;
  level: string;
  features: string[];
  compatible: boolean;
  rank?: number;
  missing?: string[];
  reason?: string;
  scan: { status: string };
}
interface Resolved {
  node: { architecture: string; level: string; level_source: string; features: string[] };
  selected?: { digest: string; level: string; reference: string };
  candidates?: Candidate[];
  errors?: { code: string; message: string }[];
}

/** "Which build does my node get?": a level, /proc/cpuinfo flags or NFD labels -> the resolve API's ranking. */
export function nodeFromInput(kind: string, level: string, text: string): Record<string, unknown> {
  if (kind === "flags") {
    const line = text.split("\n").find((l) => /^\s*(flags|Features)\s*:/.test(l)) ?? text;
    const flags = line.replace(/^\s*(flags|Features)\s*:/, "").trim().split(/\s+/).filter(Boolean);
    return { os: "linux", architecture: "amd64", flags };
  }
  if (kind === "labels") {
    const labels: Record<string, string> = {};
    for (const l of text.split(/[\n,]/)) {
      const m = l.trim().match(/^([^=:\s]+)\s*[=:]\s*"?([^"]*)"?$/);
      if (m) labels[m[1]] = m[2];
    }
    if (!labels["kubernetes.io/arch"]) labels["kubernetes.io/arch"] = "amd64";
    return { labels };
  }
  return { os: "linux", architecture: "amd64", level };
}

function ResolvePanel({ image }: { image: string }) {
  const [kind, setKind] = useState("level");
  const [level, setLevel] = useState("x86-64-v3");
  const [text, setText] = useState("");
  const [res, setRes] = useState<Resolved | null>(null);
  const [err, setErr] = useState("");
  const run = async (e: Event) => {
    e.preventDefault();
    setErr("");
    try {
      const r = await call("POST", "/isa/resolve", { body: { image, node: nodeFromInput(kind, level, text) }, raw: true });
      const j = (await r.json()) as Resolved;
      if (!r.ok && r.status !== 409) throw new Error(j.errors?.[0]?.message ?? `HTTP ${r.status}`);
      setRes(j);
    } catch (x) {
      setRes(null);
      setErr(x instanceof Error ? x.message : String(x));
    }
  };
  return (
    <div class="card resolve">
      <h3>Which build does my node get?</h3>
      <form class="form" onSubmit={run}>
        <fieldset>
          <legend>Describe the node by</legend>
          {[
            ["level", "a level"],
            ["flags", "/proc/cpuinfo flags"],
            ["labels", "NFD labels"],
          ].map(([k, l]) => (
            <label class="check">
              <input type="radio" name="node-kind" checked={kind === k} onChange={() => setKind(k)} /> {l}
            </label>
          ))}
        </fieldset>
        {kind === "level" ? (
          <>
            <label for="node-level">Level</label>
            <select id="node-level" value={level} onChange={(e) => setLevel((e.target as HTMLSelectElement).value)}>
              {["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"].map((l) => (
                <option value={l}>{l}</option>
              ))}
            </select>
          </>
        ) : (
          <>
            <label for="node-text">{kind === "flags" ? "Paste the flags line of /proc/cpuinfo" : "Paste the node's feature.node.kubernetes.io labels (name=value per line)"}</label>
            <textarea id="node-text" rows={4} required value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
          </>
        )}
        <div class="actions">
          <button type="submit" class="btn primary">
            Resolve
          </button>
        </div>
      </form>
      <FormError msg={err} />
      {res && (
        <div class="resolution" role="status">
          <p>
            Node: {res.node.architecture} <strong>{res.node.level}</strong> <span class="muted">(from {res.node.level_source})</span>
          </p>
          {res.selected ? (
            <p class="selected">
              Gets <strong>{res.selected.level}</strong> · <code title={res.selected.digest}>{shortDigest(res.selected.digest)}</code>
            </p>
          ) : (
            <p class="form-error">No variant fits this node.</p>
          )}
          <div class="table-wrap">
            <table aria-label="Candidates">
              <thead>
                <tr>
                  <th scope="col">Variant</th>
                  <th scope="col">Decision</th>
                  <th scope="col">Scan</th>
                  <th scope="col">Why</th>
                </tr>
              </thead>
              <tbody>
                {(res.candidates ?? []).map((c) => (
                  <tr class={res.selected?.digest === c.digest ? "chosen" : ""}>
                    <td data-label="Variant">
                      {c.level}
                      {c.features.length > 0 && ` +${c.features.join("+")}`} <code>{shortDigest(c.digest)}</code>
                    </td>
                    <td data-label="Decision">
                      {res.selected?.digest === c.digest ? (
                        <span class="badge ok">chosen</span>
                      ) : c.compatible ? (
                        <span class="badge">fits, rank {c.rank}</span>
                      ) : (
                        <span class="badge bad">refused</span>
                      )}
                    </td>
                    <td data-label="Scan">
                      <span class={`badge ${verdictClass(c.scan.status)}`}>{c.scan.status}</span>
                    </td>
                    <td data-label="Why">
                      {c.compatible
                        ? res.selected?.digest === c.digest
                          ? "best compatible build"
                          : "compatible, ranked lower"
                        : `${c.reason ?? "incompatible"}${c.missing && c.missing.length ? ` (missing ${c.missing.join(", ")})` : ""}`}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
      )}
    </div>
  );
}
