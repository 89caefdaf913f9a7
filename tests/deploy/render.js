#!/usr/bin/env node
// Renders one overlay of manifests/ with kubectl, as an operator applies it,
// and lays it out for a test: OUT/rendered.yaml (every object; the fake API
// server loads its RBAC objects from it) and OUT/configmaps/NAME/KEY (each
// ConfigMap's files, as a pod mounts them).
//
//   node tests/deploy/render.js OVERLAY_DIR OUT
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");
const YAML = require("yaml");

const [overlay, out] = process.argv.slice(2);
if (!overlay || !out) {
  console.error("usage: render.js OVERLAY_DIR OUT");
  process.exit(2);
}
const text = execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8", maxBuffer: 64 << 20 });
fs.mkdirSync(path.join(out, "configmaps"), { recursive: true });
fs.writeFileSync(path.join(out, "rendered.yaml"), text);
for (const doc of YAML.parseAllDocuments(text).map((d) => d.toJSON()).filter(Boolean)) {
  if (doc.kind !== "ConfigMap") continue;
  const dir = path.join(out, "configmaps", doc.metadata.name);
  fs.mkdirSync(dir, { recursive: true });
  for (const [k, v] of Object.entries(doc.data || {})) fs.writeFileSync(path.join(dir, k), v);
}
