#!/usr/bin/env node
// Generates tests/fakes/kube_fields.json: the field tree of the kinds the fake
// Kubernetes API server stores (Namespace, Node, Pod, Service, EndpointSlice,
// NetworkPolicy), taken from the TypeScript declarations of the pinned
// kubernetes-models package (generated upstream from the Kubernetes OpenAPI
// spec). The fake uses it the way the real API server uses its Go types: to
// refuse unknown fields under fieldValidation=Strict (what kubectl sends), to
// drop them otherwise, and to refuse values of the wrong type.
//
//   node tests/deploy/gen-kube-fields.js [OUT]     (default: stdout)
//
// `deploy_kube_fields_fresh` regenerates it and fails when the committed file
// differs, so a change of the pinned package shows up in review.
"use strict";
const fs = require("fs");
const path = require("path");

const modules = path.join(__dirname, "node_modules");
const trees = [path.join(modules, "kubernetes-models"), path.join(modules, "@kubernetes-models", "apimachinery")];

const roots = {
  "v1/Namespace": "IoK8sApiCoreV1Namespace",
  "v1/Node": "IoK8sApiCoreV1Node",
  "v1/Pod": "IoK8sApiCoreV1Pod",
  "v1/Service": "IoK8sApiCoreV1Service",
  "discovery.k8s.io/v1/EndpointSlice": "IoK8sApiDiscoveryV1EndpointSlice",
  "networking.k8s.io/v1/NetworkPolicy": "IoK8sApiNetworkingV1NetworkPolicy",
};

function walk(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "node_modules" && e.name !== "_schemas") walk(p, out);
    } else if (e.name.endsWith(".d.ts")) {
      out.push(p);
    }
  }
  return out;
}

// Canonical name (without the leading I) -> {fields: {name: typeText}, required: [...]} or {alias: typeText}.
const decls = {};

function parseFile(file) {
  const text = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const exported = {};
  for (const m of text.matchAll(/export \{([^}]*)\}/g)) {
    for (const part of m[1].split(",")) {
      const [local, as] = part.trim().split(/\s+as\s+/);
      if (as && as.startsWith("IIoK8s")) exported[local] = as.slice(1);
    }
  }
  for (const m of text.matchAll(/export interface (\w+)( extends TypeMeta)?\s*\{/g)) {
    const name = exported[m[1]];
    if (!name) continue;
    // The body: balanced braces from the opening one.
    let depth = 0, i = m.index + m[0].length - 1, start = i + 1;
    for (; i < text.length; i++) {
      if (text[i] === "{") depth++;
      else if (text[i] === "}" && --depth === 0) break;
    }
    const body = text.slice(start, i);
    // A kind's interface extends TypeMeta: apiVersion and kind.
    const fields = m[2] ? { apiVersion: "string", kind: "string" } : {}, required = [];
    // Top-level members only: split at ';' outside braces/angles.
    let d = 0, cur = "";
    for (const ch of body) {
      if (ch === "{" || ch === "<" || ch === "(") d++;
      if (ch === "}" || ch === ">" || ch === ")") d--;
      if (ch === ";" && d === 0) {
        const fm = cur.trim().match(/^"([^"]+)"(\?)?:\s*([\s\S]+)$/);
        if (fm) {
          fields[fm[1]] = fm[3].replace(/\s+/g, " ").trim();
          if (!fm[2]) required.push(fm[1]);
        }
        cur = "";
      } else {
        cur += ch;
      }
    }
    decls[name] = { fields, required };
  }
  for (const m of text.matchAll(/export declare type (\w+) = ([^;]+);/g)) {
    const name = exported[m[1]];
    if (name) decls[name] = { alias: m[2].trim() };
  }
}

for (const t of trees) for (const f of walk(t, [])) parseFile(f);

const types = {};
const pending = Object.values(roots);

// A TypeScript type text -> a descriptor the fake reads:
//   "string" "number" "boolean" "int-or-string" "any"   scalars (and anything goes)
//   "ref:Name"  "array:<d>"  "map:<d>"
function describe(t) {
  t = t.trim();
  let m;
  if ((m = t.match(/^Array<(.+)>$/))) return "array:" + describe(m[1]);
  if ((m = t.match(/^\{ \[key: string\]: (.+?);? \}$/))) return "map:" + describe(m[1]);
  if (t === "string" || /^"[^"]*"( \| "[^"]*")*$/.test(t)) return "string";
  if (t === "number") return "number";
  if (t === "boolean") return "boolean";
  if (t === "string | number" || t === "number | string") return "int-or-string";
  if (t === "any" || t === "{}" || t === "object" || t === "unknown") return "any";
  if ((m = t.match(/^I(IoK8s\w+)$/))) {
    const d = decls[m[1]];
    if (!d) throw new Error("no declaration of " + m[1]);
    if (d.alias !== undefined) return describe(d.alias);
    if (!types[m[1]] && !pending.includes(m[1])) pending.push(m[1]);
    return "ref:" + m[1];
  }
  throw new Error("cannot describe the type '" + t + "'");
}

while (pending.length) {
  const name = pending.shift();
  if (types[name]) continue;
  const d = decls[name];
  if (!d || d.alias !== undefined) throw new Error("no interface " + name);
  const fields = {};
  types[name] = { fields, required: d.required.filter((f) => f !== "apiVersion" && f !== "kind") };
  for (const [f, t] of Object.entries(d.fields)) fields[f] = describe(t);
}

const pkg = JSON.parse(fs.readFileSync(path.join(trees[0], "package.json"), "utf8"));
const sorted = {};
for (const k of Object.keys(types).sort()) sorted[k] = types[k];
const out =
  JSON.stringify({ generator: "tests/deploy/gen-kube-fields.js", source: "kubernetes-models " + pkg.version, roots, types: sorted }, null, 1) +
  "\n";
if (process.argv[2]) fs.writeFileSync(process.argv[2], out);
else process.stdout.write(out);
