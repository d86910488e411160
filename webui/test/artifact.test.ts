import { test } from "node:test";
import assert from "node:assert/strict";
import { nodeFromInput, pullCommands } from "../src/pages/artifact";

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
