// A repository's artifacts: digest (copyable), tags, platforms of an index, size, push and pull times.
import { useState } from "preact/hooks";
import { list, send } from "../api";
import { formatAgo, formatBytes, formatTime, shortDigest } from "../format";
import { listUrl, repoSegment } from "../query";
import { CopyButton } from "../ui/dialog";
import { FormError, Loading, useAction } from "../ui/states";
import { PagedTable } from "../ui/table";
import { useProjectPerms } from "./project";
import type { SquashfsJob } from "./squashfs";

export interface Platform {
  os?: string;
  architecture?: string;
  variant?: string;
  features?: string[];
}

export interface Artifact {
  id: number;
  digest: string;
  media_type: string;
  artifact_type: string | null;
  type: string;
  size: number;
  push_time: string;
  pull_time: string | null;
  annotations: Record<string, string> | null;
  tags: { name: string; push_time: string }[];
  references: { child_digest: string; child_media_type: string; platform: Platform | null; annotations: Record<string, string> | null }[] | null;
  isa_variants: unknown[] | null;
  accessories: { digest: string; artifact_type: string | null; size: number }[];
  /** the HPC squashfs conversion of an image manifest (absent or null: none) */
  squashfs?: SquashfsJob | null;
  /** Harbor's extra_attrs: from the image config, for images only */
  extra_attrs?: ImageAttrs;
}

/** The runtime part of an image config (OCI image spec "config"; Docker's capitalised keys) */
export interface ImageRuntime {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Env?: string[] | null;
  Labels?: Record<string, string> | null;
  WorkingDir?: string;
  User?: string;
  ExposedPorts?: Record<string, unknown> | null;
  Volumes?: Record<string, unknown> | null;
  StopSignal?: string;
}
export interface ImageAttrs {
  architecture: string;
  os: string;
  variant?: string;
  author: string;
  created: string;
  config: ImageRuntime;
}

export function platformText(p: Platform | null | undefined): string {
  if (!p) return "unknown";
  return [p.os, p.architecture, p.variant].filter(Boolean).join("/");
}

export function CopyDigest({ digest }: { digest: string }) {
  return (
    <span class="digest">
      <code title={digest}>{shortDigest(digest)}</code>
      <CopyButton text={digest} label={`digest ${digest}`} />
    </span>
  );
}

export function RepositoryPage({ project, repo }: { project: string; repo: string }) {
  const perms = useProjectPerms(project);
  const [tick, setTick] = useState(0);
  const { err, act } = useAction(() => setTick((t) => t + 1));
  if (!perms.data) return <Loading />;
  const pm = perms.data;
  const base = `/projects/${encodeURIComponent(project)}/repositories/${repoSegment(repo)}`;
  const page = `/projects/${encodeURIComponent(project)}/repositories/${encodeURIComponent(repo)}`;
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/projects">Projects</a> / <a href={`/projects/${encodeURIComponent(project)}`}>{project}</a> / <span>{repo}</span>
      </nav>
      <div class="page-head">
        <h1>
          {project}/{repo}
        </h1>
      </div>
      <FormError msg={err} />
      <PagedTable<Artifact>
        label="Artifacts"
        searchLabel="Find by exact tag"
        reloadKey={tick}
        rowKey={(a) => a.id}
        fetch={(s) => list<Artifact>(listUrl(`${base}/artifacts`, { page: s.page, pageSize: s.pageSize, q: s.q ? { tags: s.q } : undefined }))}
        empty="No artifacts in this repository."
        columns={[
          {
            label: "Artifact",
            render: (a) => (
              <>
                <a href={`${page}/artifacts/${a.digest}`} title={a.digest}>
                  {shortDigest(a.digest)}
                </a>{" "}
                <CopyDigest digest={a.digest} />
              </>
            ),
          },
          {
            label: "Tags",
            render: (a) =>
              a.tags.length === 0 ? (
                <span class="muted">untagged</span>
              ) : (
                <span class="tags">
                  {a.tags.slice(0, 5).map((t) => (
                    <span class="badge">{t.name}</span>
                  ))}
                  {a.tags.length > 5 && <span class="muted"> +{a.tags.length - 5} more</span>}
                </span>
              ),
          },
          {
            label: "Platforms",
            render: (a) =>
              a.references ? (
                <span class="wrap">{a.references.map((r) => platformText(r.platform)).join(", ")}</span>
              ) : (
                <span class="muted">{a.artifact_type ?? "image"}</span>
              ),
          },
          { label: "Size", class: "num", render: (a) => formatBytes(a.size) },
          { label: "Pushed", render: (a) => <time dateTime={a.push_time} title={formatTime(a.push_time)}>{formatAgo(a.push_time)}</time> },
          { label: "Pulled", render: (a) => (a.pull_time ? <time dateTime={a.pull_time} title={formatTime(a.pull_time)}>{formatAgo(a.pull_time)}</time> : "never") },
          ...(pm.can("artifact", "delete")
            ? [
                {
                  label: "Actions",
                  render: (a: Artifact) => (
                    <button
                      type="button"
                      class="btn danger"
                      aria-label={`Delete artifact ${a.digest}`}
                      onClick={() => confirm(`Delete ${shortDigest(a.digest)} and its tags?`) && act(() => send("DELETE", `${base}/artifacts/${a.digest}`))}
                    >
                      Delete
                    </button>
                  ),
                },
              ]
            : []),
        ]}
      />
    </>
  );
}
