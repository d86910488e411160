// The HPC squashfs of an image manifest on its artifact page (issue 15): the conversion's status (queued, running
// with progress, done, failed with the reason), its size and compression, the file published on the shared file
// system and the `srun --container-image=…` line a Slurm + pyxis user pastes. Data: the artifact JSON's
// "squashfs" (the job) and the project's metadata.hpc_squashfs; "Convert now" is GET …/squashfs, which queues.
import { useEffect, useState } from "preact/hooks";
import { get } from "../api";
import { formatBytes, formatTime } from "../format";
import { CopyButton } from "../ui/dialog";
import { FormError, useAction } from "../ui/states";

export interface SquashfsJob {
  status: "queued" | "running" | "done" | "failed";
  progress: number | null;
  reason: string | null;
  attempts: number;
  digest: string | null;
  size: number | null;
  uncompressed_size: number | null;
  compression: string | null;
  isa_level: string | null;
  published_path: string | null;
  seconds: number | null;
  update_time: string | null;
}

/** A word the shell takes as it is, else single-quoted. */
function shellWord(w: string): string {
  return /^[A-Za-z0-9_./:@#%+=,-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

/**
 * What a Slurm user runs: the published file when there is one (no registry traffic at job start), else the
 * image by digest through pyxis, whose Berth importer (deploy/slurm/pyxis-importer) fetches the squashfs.
 */
export function srunLine(job: SquashfsJob | null, host: string, repo: string, digest: string): string {
  const image = job?.status === "done" && job.published_path ? job.published_path : `${host}#${repo}@${digest}`;
  return `srun --container-image=${shellWord(image)}`;
}

/** The status line: a badge class and its words, "running 42 %" with the progress. */
export function squashfsState(job: SquashfsJob | null, mode: string): { cls: string; text: string } {
  if (!job) return { cls: "", text: mode === "pull" ? "not converted yet (on first request)" : "not converted" };
  switch (job.status) {
    case "done":
      return { cls: "ok", text: "done" };
    case "failed":
      return { cls: "bad", text: "failed" };
    case "running":
      return { cls: "warn", text: `running ${Math.floor((job.progress ?? 0) * 100)} %` };
    default:
      return { cls: "warn", text: job.attempts > 0 ? `queued (attempt ${job.attempts + 1})` : "queued" };
  }
}

export function SquashfsSection(props: { base: string; mode: string; job: SquashfsJob | null; host: string; repo: string; digest: string; reload: () => void }) {
  const { job, mode } = props;
  const active = job != null && (job.status === "queued" || job.status === "running");
  const [busy, setBusy] = useState(false);
  const { err, act } = useAction(props.reload);
  // while the gateway works, the page follows it
  useEffect(() => {
    if (!active) return;
    const t = setInterval(props.reload, 1500);
    return () => clearInterval(t);
  }, [active]);
  const st = squashfsState(job, mode);
  const srun = srunLine(job, props.host, props.repo, props.digest);
  const convert = async () => {
    setBusy(true);
    await act(() => get(`${props.base}/squashfs`));
    setBusy(false);
  };
  return (
    <section class="card squashfs" aria-labelledby="sqfs-h">
      <h2 id="sqfs-h">HPC squashfs</h2>
      <dl class="kv">
        <dt>Status</dt>
        <dd>
          <span class={`badge ${st.cls}`} role="status">
            {st.text}
          </span>
          {job?.status === "running" && (
            <>
              {" "}
              <progress max={1} value={job.progress ?? 0} aria-label="Conversion progress" />
            </>
          )}
        </dd>
        {job?.status === "failed" && (
          <>
            <dt>Reason</dt>
            <dd>{job.reason ?? "—"}</dd>
          </>
        )}
        {job?.status === "done" && (
          <>
            <dt>Size</dt>
            <dd>
              {formatBytes(job.size)}
              {job.uncompressed_size != null && <span class="muted"> ({formatBytes(job.uncompressed_size)} of files)</span>}
            </dd>
            <dt>Compression</dt>
            <dd>{job.compression ?? "—"}</dd>
            {job.isa_level && (
              <>
                <dt>ISA level</dt>
                <dd>{job.isa_level}</dd>
              </>
            )}
            <dt>Published path</dt>
            <dd>
              {job.published_path ? (
                <div class="copyable">
                  <code>{job.published_path}</code>
                  <CopyButton text={job.published_path} label="published path" />
                </div>
              ) : (
                <span class="muted">not published (no gateway.publish_dir): nodes download it by digest</span>
              )}
            </dd>
            <dt>Converted</dt>
            <dd>
              {formatTime(job.update_time)}
              {job.seconds != null && ` in ${job.seconds.toFixed(1)} s`}
            </dd>
          </>
        )}
      </dl>
      {(job == null || job.status === "done") && (
        <div class="pull">
          <span class="muted">Slurm (pyxis)</span>
          <div class="copyable">
            <code>{srun}</code>
            <CopyButton text={srun} label="srun command" />
          </div>
        </div>
      )}
      {job == null && (
        <p>
          <button type="button" class="btn" disabled={busy} onClick={convert}>
            Convert now
          </button>
        </p>
      )}
      <FormError msg={err} />
    </section>
  );
}
