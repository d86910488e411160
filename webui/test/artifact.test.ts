import { test } from "node:test";
import assert from "node:assert/strict";
import { commandLine, historyRows, nodeFromInput, pullCommands } from "../src/pages/artifact";

test("a pasted /proc/cpuinfo becomes the node's full flags list", () => {
  const cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse sse2 avx2 avx512f\nbugs\t\t: spectre_v1\n";
  assert.deepEqual(nodeFromInput("flags", "", cpuinfo), { os: "linux", architecture: "amd64", flags: ["fpu", "sse", "sse2", "avx2", "avx512f"] });
  // just the flags, without the "flags :" prefix
  assert.deepEqual((nodeFromInput("flags", "", "fpu sse2  avx") as { flags: string[] }).flags, ["fpu", "sse2", "avx"]);
});

test("NFD labels in name=value or YAML form; the architecture defaults to amd64", () => {
  const n = nodeFromInput("labels", "", 'feature.node.kubernetes.io/cpu-cpuid.AVX2=true\nfeature.node.kubernetes.io/cpu-cpuid.X86_64_V3: "true"\n\ngarbage');
  assert.deepEqual(n, {
    labels: {
      "feature.node.kubernetes.io/cpu-cpuid.AVX2": "true",
      "feature.node.kubernetes.io/cpu-cpuid.X86_64_V3": "true",
      "kubernetes.io/arch": "amd64",
    },
  });
  assert.equal((nodeFromInput("labels", "", "kubernetes.io/arch=arm64") as { labels: Record<string, string> }).labels["kubernetes.io/arch"], "arm64");
});

test("a level alone", () => {
  assert.deepEqual(nodeFromInput("level", "x86-64-v3", "ignored"), { os: "linux", architecture: "amd64", level: "x86-64-v3" });
});

test("pull commands are pinned by digest for every client", () => {
  const d = "sha256:" + "a".repeat(64);
  const cmds = Object.fromEntries(pullCommands("reg.example:5000", "hpc/app", d));
  assert.equal(cmds["docker"], `docker pull reg.example:5000/hpc/app@${d}`);
  assert.equal(cmds["enroot"], `enroot import 'docker://reg.example:5000#hpc/app@${d}'`);
  assert.equal(cmds["Apptainer"], `apptainer pull docker://reg.example:5000/hpc/app@${d}`);
  for (const c of Object.values(cmds)) assert.ok(c.includes(d), c);
});

test("build history: the builder's shell wrapper goes, and steps that made a layer get it in order", () => {
  const rows = historyRows(
    [
      { created: "2026-01-02T03:04:05Z", created_by: "/bin/sh -c #(nop) ADD file:abc in / " },
      { created_by: "/bin/sh -c #(nop)  CMD [\"sh\"]", empty_layer: true },
      { created_by: "/bin/sh -c apt-get update", comment: "buildkit" },
      { created_by: "COPY app /app # buildkit" },
      { created_by: "RUN extra" }, // more entries with layers than the manifest has: no layer to name
    ],
    3,
  );
  assert.deepEqual(
    rows.map((r) => [r.step, r.command, r.layer]),
    [
      [1, "ADD file:abc in /", 0],
      [2, 'CMD ["sh"]', null],
      [3, "RUN apt-get update", 1],
      [4, "COPY app /app # buildkit", 2],
      [5, "RUN extra", null],
    ],
  );
  assert.equal(rows[0].created, "2026-01-02T03:04:05Z");
  assert.equal(rows[1].created, null);
  assert.equal(rows[2].comment, "buildkit");
  assert.deepEqual(historyRows([], 2), []);
});

test("entrypoint and command lines quote only the words that need it", () => {
  assert.equal(commandLine(["/entry.sh", "serve", "--port", "80"]), "/entry.sh serve --port 80");
  assert.equal(commandLine(["sh", "-c", "echo $HOME"]), 'sh -c "echo $HOME"');
  assert.equal(commandLine(["a", ""]), 'a ""');
  assert.equal(commandLine(null), "");
  assert.equal(commandLine([]), "");
});
