// Bundle the UI into dist/ (or the folder given with --out): hashed assets, an index.html that names them,
// a .gz beside every file for nginx's gzip_static, and the first-load budget checked. `--tests` instead
// bundles test/*.test.ts for node:test into ../build/webui-test (or --out).
import * as esbuild from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const BUDGET = 250 * 1024; // first load, gzipped JS + CSS (issue #11)

if (args.includes("--tests")) {
  const out = resolve(opt("--out", join(here, "..", "build", "webui-test")));
  rmSync(out, { recursive: true, force: true });
  const tests = readdirSync(join(here, "test")).filter((f) => f.endsWith(".test.ts"));
  await esbuild.build({
    entryPoints: tests.map((f) => join(here, "test", f)),
    outdir: out, outExtension: { ".js": ".mjs" }, bundle: true, platform: "node", format: "esm",
    target: "node18", jsx: "automatic", jsxImportSource: "preact", logLevel: "warning",
  });
  console.log(`webui: ${tests.length} test files bundled into ${out}`);
  process.exit(0);
}

const out = resolve(opt("--out", join(here, "dist")));
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
const result = await esbuild.build({
  entryPoints: [join(here, "src", "main.tsx")],
  outdir: join(out, "assets"), entryNames: "[name]-[hash]", chunkNames: "chunk-[hash]", assetNames: "[name]-[hash]",
  bundle: true, splitting: true, format: "esm", minify: true, sourcemap: false, metafile: true,
  target: ["chrome100", "firefox100", "safari15"], jsx: "automatic", jsxImportSource: "preact",
  define: { "process.env.NODE_ENV": '"production"' }, logLevel: "warning", legalComments: "none",
});
// the entry's own output, the chunks it imports statically (loaded before first paint) and its CSS
const outs = result.metafile.outputs;
const entryOut = Object.keys(outs).find((f) => f.endsWith(".js") && outs[f].entryPoint && outs[f].entryPoint.endsWith("src/main.tsx"));
const firstFiles = new Set();
const visit = (f) => {
  if (firstFiles.has(f)) return;
  firstFiles.add(f);
  for (const i of outs[f].imports) if (i.kind === "import-statement" && outs[i.path]) visit(i.path);
};
visit(entryOut);
const cssOut = outs[entryOut].cssBundle;
if (cssOut) firstFiles.add(cssOut);
const web = (f) => "/" + relative(out, resolve(f));
const js = web(entryOut), css = web(cssOut);
const html = readFileSync(join(here, "src", "index.html"), "utf8").replace("%JS%", js).replace("%CSS%", css);
writeFileSync(join(out, "index.html"), html);
for (const f of ["favicon.svg"]) writeFileSync(join(out, f), readFileSync(join(here, "src", f)));

// precompress everything nginx may send (gzip_static serves file.gz when the client accepts gzip)
const sizes = {};
const walk = (d) => readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]));
for (const f of walk(out)) {
  const gz = gzipSync(readFileSync(f), { level: 9 });
  writeFileSync(f + ".gz", gz);
  sizes["/" + relative(out, f)] = gz.length;
}
const first = [...firstFiles].reduce((n, f) => n + sizes[web(f)], 0) + sizes["/index.html"];
const manifest = { js, css, first_load: [...firstFiles].map(web), first_load_gzip_bytes: first, budget_bytes: BUDGET, files: sizes,
                   build: createHash("sha256").update(JSON.stringify(sizes)).digest("hex").slice(0, 12) };
writeFileSync(join(out, "build.json"), JSON.stringify(manifest, null, 1));
console.log(`webui: built into ${out}: first load ${(first / 1024).toFixed(1)} KiB gzipped (budget ${BUDGET / 1024} KiB)`);
if (first > BUDGET) {
  console.error("webui: first load exceeds the budget");
  process.exit(1);
}
