#!/usr/bin/env node
// The offline checks of manifests/ (ctest deploy_manifests, through run-checks.sh):
//
//  1. every overlay renders with the kubectl on PATH (kustomize built in);
//  2. every rendered object validates against the Kubernetes API schemas
//     (kubernetes-models, pinned in package-lock.json) or, for the OpenShift
//     SecurityContextConstraints and the NetworkAttachmentDefinition, against
//     their CRD schemas (crds/); and a strict pass refuses every key the
//     schema does not know (the validators ignore unknown keys: an object is
//     wrapped in a Proxy, and a key the validator never looked at is unknown);
//  3. only API versions every Kubernetes from 1.29 to 1.33 serves (kinds
//     newer than 1.29 only in the components that say so), and only fields
//     1.29 knows (kubernetes-types 1.29.0) as well as 1.33 (step 2);
//  4. consistency: each DaemonSet's selector matches its pod template, every
//     hostPath has a type, every image and command is one manifests/images.txt
//     lists and the build produced, every env var a config file names is set
//     by its container, and the ConfigMaps pass the daemons' --check-config
//     (run in a private mount namespace where the pod's mounts exist);
//  5. monitoring: each PodMonitor selects DaemonSet pods that declare its
//     ports, whose daemons listen there (metrics.listen) with its scheme, and
//     the Secrets it reads are rendered or documented;
//  6. the requirements of issue 17 on every rendering (requirements.js: no
//     credentials on the host, the CNI install, least capabilities as the
//     install guide documents them, probes, RBAC, the systemd units).
//
//   node tests/deploy/check-manifests.js SOURCE_DIR BUILD_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const os = require("os");
const { execFileSync, spawnSync } = require("child_process");
const YAML = require("yaml");
const Ajv = require("ajv");

const [src, build] = process.argv.slice(2);
// DPU_DEPLOY_RUN_DAEMONS=0 leaves out the runs of the daemons on the configs
// (tests/deploy/mutations.js, for the mutations that are not about a config).
const runDaemons = process.env.DPU_DEPLOY_RUN_DAEMONS !== "0";
if (!src || !build) {
  console.error("usage: check-manifests.js SOURCE_DIR BUILD_DIR");
  process.exit(2);
}
const manifests = path.join(src, "manifests");
let failures = 0;
const fail = (where, msg) => {
  failures++;
  console.log(`FAIL ${where}: ${msg}`);
};

// --- 1. render ---------------------------------------------------------------
function kustomizations(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) kustomizations(p, out);
    else if (e.name === "kustomization.yaml") out.push(dir);
  }
  return out;
}
const overlays = kustomizations(path.join(manifests, "overlays")).filter((d) =>
  YAML.parse(fs.readFileSync(path.join(d, "kustomization.yaml"), "utf8")).kind !== "Component");
// Optional components (monitoring, ...) not in an overlay by default are
// rendered on top of each Kubernetes overlay, so they are checked too.
const components = fs.existsSync(path.join(manifests, "components"))
  ? fs.readdirSync(path.join(manifests, "components")).map((c) => path.join(manifests, "components", c))
  : [];

function render(dir) {
  return execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 64 << 20 });
}

const rendered = [];
for (const o of overlays) {
  const name = path.relative(manifests, o);
  try {
    rendered.push({ name, docs: YAML.parseAllDocuments(render(o)).map((d) => d.toJSON()).filter(Boolean) });
  } catch (e) {
    fail(name, "kubectl kustomize failed: " + (e.stderr || e.message));
  }
}
const base = path.join(manifests, "overlays", "dpu-nodes");
for (const c of components) {
  const k = YAML.parse(fs.readFileSync(path.join(base, "kustomization.yaml"), "utf8"));
  if ((k.components || []).some((x) => path.resolve(base, x) === c)) continue;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "dpu-manifests-"));
  fs.writeFileSync(path.join(tmp, "kustomization.yaml"),
    YAML.stringify({ apiVersion: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization",
                     resources: [path.relative(tmp, base)], components: [path.relative(tmp, c)] }));
  const name = "overlays/dpu-nodes + " + path.relative(manifests, c);
  try {
    rendered.push({ name, docs: YAML.parseAllDocuments(render(tmp)).map((d) => d.toJSON()).filter(Boolean) });
  } catch (e) {
    fail(name, "kubectl kustomize failed: " + (e.stderr || e.message));
  }
  fs.rmSync(tmp, { recursive: true });
}

// --- 2. schemas ----------------------------------------------------------------
const crdSchemas = {};
const ajv = new Ajv({ allErrors: true, strict: false });
for (const f of fs.readdirSync(path.join(__dirname, "crds"))) {
  const crd = JSON.parse(fs.readFileSync(path.join(__dirname, "crds", f), "utf8"));
  crdSchemas[crd.apiVersion + "/" + crd.kind] = ajv.compile(crd.schema);
}

// Packages of CRD kinds (pinned like kubernetes-models): group -> package.
const crdPackages = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };
const upper = (w) => w[0].toUpperCase() + w.slice(1);

function schemaModule(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const v = upper(version);
  let file;
  if (crdPackages[group]) {
    // MonitoringCoreosComV1PodMonitor: every part of the group, capitalised.
    const g = group.split(".").map(upper).join("");
    file = path.join(__dirname, "node_modules", crdPackages[group], "_schemas", `${g}${v}${kind}.js`);
  } else {
    const g = group === "" ? "Core" : upper(group.split(".")[0]);
    file = path.join(__dirname, "node_modules", "kubernetes-models", "_schemas", `IoK8sApi${g}${v}${kind}.js`);
  }
  return fs.existsSync(file) ? require(file) : null;
}

// Wraps `value` so every key the validator reads is recorded; `seen` gets
// "path" for each object that was enumerated (maps) or read key by key.
function watch(value, p, read, enumerated) {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value, {
    get(t, k) {
      if (typeof k === "string") read.add(p + "/" + k);
      const v = t[k];
      return typeof k === "string" ? watch(v, p + "/" + k, read, enumerated) : v;
    },
    ownKeys(t) {
      enumerated.add(p);
      return Reflect.ownKeys(t);
    },
  });
}

function unknownKeys(value, p, read, enumerated, out) {
  if (value === null || typeof value !== "object") return;
  for (const k of Object.keys(value)) {
    const kp = p + "/" + k;
    if (!Array.isArray(value) && !enumerated.has(p) && !read.has(kp)) out.push(kp.slice(1).replace(/\//g, "."));
    else unknownKeys(value[k], kp, read, enumerated, out);
  }
}

// --- 3. API versions served by Kubernetes 1.29 .. 1.33 ---------------------------
const servedFrom129 = new Set(["v1/Namespace", "v1/ServiceAccount", "v1/ConfigMap", "v1/Secret", "apps/v1/DaemonSet",
  "rbac.authorization.k8s.io/v1/ClusterRole", "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
  "rbac.authorization.k8s.io/v1/Role", "rbac.authorization.k8s.io/v1/RoleBinding",
  "scheduling.k8s.io/v1/PriorityClass", "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition",
  "security.openshift.io/v1/SecurityContextConstraints", "monitoring.coreos.com/v1/PodMonitor"]);
// GA in 1.30: only in components whose kustomization says "Kubernetes >= 1.30".
const servedFrom130 = new Set(["admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding"]);

// The fields of Kubernetes 1.29 (kubernetes-types 1.29.0: the TypeScript
// declarations generated from 1.29's OpenAPI spec). kubernetes-models above is
// 1.33's: a field must be in both, or a 1.29 server refuses it (kubectl asks
// for strict field validation) or a 1.33 one does not know it.
const k129 = path.join(__dirname, "node_modules", "kubernetes-types");
const k129Files = {};  // "core/v1" -> {interfaces: {Name: {field: type}}, imports: {Name: "meta/v1"}}
(function load(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) load(p);
    else if (e.name.endsWith(".d.ts")) {
      const key = path.relative(k129, p).replace(/\.d\.ts$/, "");
      const text = fs.readFileSync(p, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
      const file = { interfaces: {}, imports: {} };
      for (const m of text.matchAll(/import \{([^}]*)\} from "([^"]+)";/g))
        for (const n of m[1].split(",")) file.imports[n.trim()] = path.join(path.dirname(key), m[2]);
      for (const m of text.matchAll(/export interface (\w+) \{\n([\s\S]*?)\n\}/g)) {
        const fields = {};
        const body = m[2].replace(/\{\s*\[name: string\]: ([^;]+);\s*\}/g, "Map<$1>");
        for (const f of body.matchAll(/^ {4}(?:readonly )?"?([^"?:\s]+)"?\??: (.+);$/gm)) fields[f[1]] = f[2];
        file.interfaces[m[1]] = fields;
      }
      k129Files[key] = file;
    }
  }
})(k129);
function k129Unknown(value, type, fileKey, p, out) {
  if (value === null || typeof value !== "object") return;
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    for (const [i, v] of value.entries()) k129Unknown(v, m[1], fileKey, `${p}[${i}]`, out);
    return;
  }
  if ((m = /^Map<(.+)>$/.exec(type))) {
    for (const [k, v] of Object.entries(value)) k129Unknown(v, m[1], fileKey, `${p}.${k}`, out);
    return;
  }
  const file = k129Files[fileKey];
  let where = fileKey;
  if (!file.interfaces[type] && file.imports[type]) where = file.imports[type];
  const fields = (k129Files[where] || { interfaces: {} }).interfaces[type];
  if (!fields) return;  // a primitive, a literal or RawExtension: free-form
  for (const [k, v] of Object.entries(value)) {
    if (!(k in fields)) out.push(`${p}.${k}`.replace(/^\./, ""));
    else k129Unknown(v, fields[k], where, `${p}.${k}`, out);
  }
}
function k129Root(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const key = `${group === "" ? "core" : group.split(".")[0]}/${version}`;
  return k129Files[key] && k129Files[key].interfaces[kind] ? key : null;
}

const objects = [];
for (const r of rendered) {
  for (const o of r.docs) {
    const where = `${r.name}: ${o.kind}/${(o.metadata || {}).name}`;
    objects.push({ overlay: r.name, where, o });
    const gvk = o.apiVersion + "/" + o.kind;
    if (!servedFrom129.has(gvk) && !servedFrom130.has(gvk))
      fail(where, `${gvk} is not on the list of kinds served by Kubernetes 1.29-1.33 (tests/deploy/check-manifests.js)`);
    if (crdSchemas[gvk]) {
      if (!crdSchemas[gvk](o)) fail(where, "CRD schema: " + ajv.errorsText(crdSchemas[gvk].errors));
      continue;
    }
    const mod = schemaModule(o.apiVersion, o.kind);
    if (!mod) {
      fail(where, `no schema for ${gvk} (add its CRD schema to tests/deploy/crds/)`);
      continue;
    }
    const read = new Set(), enumerated = new Set();
    if (!mod.validate(watch(o, "", read, enumerated)))
      fail(where, "schema: " + mod.validate.errors.map((e) => `${e.instancePath} ${e.message || e.keyword}`).join("; "));
    const unknown = [];
    unknownKeys(o, "", read, enumerated, unknown);
    for (const u of unknown) fail(where, `unknown field "${u}"`);
    // Not in 1.29 at all (its component says so), or a CRD's kind (its own schema).
    if (servedFrom130.has(gvk) || crdPackages[o.apiVersion.split("/")[0]]) continue;
    const root = k129Root(o.apiVersion, o.kind);
    if (!root) {
      fail(where, `${gvk} is not in Kubernetes 1.29's API (kubernetes-types 1.29.0)`);
      continue;
    }
    const old = [];
    k129Unknown(o, o.kind, root, "", old);
    for (const u of old) if (!unknown.includes(u)) fail(where, `field "${u}" is not in Kubernetes 1.29's API: a 1.29 server refuses it`);
  }
}
for (const c of components) {
  const text = fs.readFileSync(path.join(c, "kustomization.yaml"), "utf8");
  const newer = objects.filter((x) => servedFrom130.has(x.o.apiVersion + "/" + x.o.kind));
  if (newer.length && !/Kubernetes >= 1\.30/.test(text) && fs.readdirSync(c).some((f) => newer.some((x) =>
      fs.readFileSync(path.join(c, f), "utf8").includes(`kind: ${x.o.kind}`))))
    fail(path.relative(manifests, c), "uses a kind GA only in Kubernetes 1.30 without saying so (\"Kubernetes >= 1.30\")");
}

// --- 4. consistency ------------------------------------------------------------
const images = {};
for (const line of fs.readFileSync(path.join(manifests, "images.txt"), "utf8").split("\n")) {
  const t = line.trim();
  if (!t || t.startsWith("#")) continue;
  const [image, file, from] = t.split(/\s+/);
  (images[image] = images[image] || {})[file] = from;
  const [how, rel] = from.split(":");
  const real = how === "build" ? path.join(build, rel) : path.join(src, rel);
  if (!fs.existsSync(real)) fail("images.txt", `${image} ${file}: ${real} does not exist (build it, or fix the list)`);
}
// When images/ (the Containerfiles) lists what each image holds, it must hold what the manifests expect.
const contents = path.join(src, "images", "contents.txt");
if (fs.existsSync(contents)) {
  const text = fs.readFileSync(contents, "utf8");
  for (const [image, files] of Object.entries(images))
    for (const f of Object.keys(files))
      if (!text.split("\n").some((l) => l.includes(image) && l.includes(f)) && !text.includes(f))
        fail("images/contents.txt", `does not list ${f} in ${image}, which the manifests run`);
}
const version = /project\(dpu-cni VERSION ([0-9.]+)/.exec(fs.readFileSync(path.join(src, "CMakeLists.txt"), "utf8"))[1];

function configFiles(overlay, name) {
  const cm = objects.find((x) => x.overlay === overlay && x.o.kind === "ConfigMap" && x.o.metadata.name.startsWith(name));
  return cm ? cm.o : null;
}

function dummyEnv(container) {
  const env = {};
  for (const e of container.env || []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom && e.valueFrom.fieldRef) {
      const f = e.valueFrom.fieldRef.fieldPath;
      env[e.name] = f === "spec.nodeName" ? "dpu-node-1" : f.endsWith("IP") ? "192.0.2.10" : "value-of-" + f;
    }
  }
  return env;
}

// Runs CMD in a private mount namespace where the container's ConfigMap and
// Secret mounts exist (Secrets as placeholder files), as the pod sees them.
function runInMounts(where, pod, container, cmd, env) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "dpu-mounts-"));
  let script = "set -e\n";
  for (const m of container.volumeMounts || []) {
    const vol = (pod.volumes || []).find((v) => v.name === m.name);
    if (!vol || (!vol.configMap && !vol.secret)) continue;
    const dir = path.join(tmp, m.name);
    fs.mkdirSync(dir, { recursive: true });
    if (vol.configMap) {
      const cm = objects.find((x) => x.o.kind === "ConfigMap" && x.o.metadata.name === vol.configMap.name &&
                                     x.overlay === where.overlay);
      if (!cm) {
        fail(where.where, `volume ${m.name}: no ConfigMap ${vol.configMap.name}`);
        continue;
      }
      for (const [k, v] of Object.entries(cm.o.data || {})) fs.writeFileSync(path.join(dir, k), v);
    } else {
      // A per-host Secret (dpu-cni-host-tls) holds NODE.crt and NODE.key for each host node.
      const keys = ["ca.crt", "tls.crt", "tls.key", "kubeconfig"];
      if (env.NODE_NAME) keys.push(`${env.NODE_NAME}.crt`, `${env.NODE_NAME}.key`);
      for (const k of keys) fs.writeFileSync(path.join(dir, k), "placeholder\n");
    }
    // A copy of the top directory on tmpfs, then the mount on top: the host's files stay untouched.
    const top = "/" + m.mountPath.split("/")[1];
    script += `if ! mountpoint -q ${top} || [ ! -e ${tmp}/.top-${top.slice(1)} ]; then mkdir -p ${tmp}/top${top}; ` +
      `mount -t tmpfs tmpfs ${tmp}/top${top}; cp -a ${top}/. ${tmp}/top${top}/ 2>/dev/null || true; ` +
      `mount --bind ${tmp}/top${top} ${top}; touch ${tmp}/.top-${top.slice(1)}; fi\n` +
      `mkdir -p ${m.mountPath}; mount --bind ${dir} ${m.mountPath}\n`;
  }
  script += 'exec "$@"\n';
  const r = spawnSync("unshare", ["-m", "--propagation", "private", "sh", "-c", script, "sh", ...cmd],
                      { encoding: "utf8", env: { ...process.env, ...env } });
  fs.rmSync(tmp, { recursive: true, force: true });
  return r;
}

const binaryFor = { "/usr/bin/host-shim": "host-shim/host-shim", "/usr/bin/dpu-agent": "dpu-agent/control/dpu-agent",
  "/usr/bin/dpu-dataplane": "dpu-agent/datapath/dpu-dataplane" };
const dataplaneHelp = spawnSync(path.join(build, binaryFor["/usr/bin/dpu-dataplane"]), ["--help"], { encoding: "utf8" });
const dataplaneCheck = /--check-config/.test(dataplaneHelp.stdout + dataplaneHelp.stderr) ? "--check-config" : "--check";

for (const x of objects) {
  const o = x.o;
  if (o.kind !== "DaemonSet") continue;
  const pod = o.spec.template.spec;
  const sel = o.spec.selector.matchLabels || {};
  for (const [k, v] of Object.entries(sel))
    if ((o.spec.template.metadata.labels || {})[k] !== v) fail(x.where, `selector ${k}=${v} does not match the pod template`);
  for (const v of pod.volumes || [])
    if (v.hostPath && !v.hostPath.type) fail(x.where, `hostPath volume ${v.name} (${v.hostPath.path}) has no type`);
  for (const c of [...(pod.initContainers || []), ...pod.containers]) {
    const [image, tag] = c.image.split(":");
    if (!images[image]) {
      fail(x.where, `container ${c.name}: image ${image} is not in manifests/images.txt`);
      continue;
    }
    if (tag !== version) fail(x.where, `container ${c.name}: tag ${tag} is not the project version ${version}`);
    const programs = [c.command && c.command[0]];
    for (const p of ["livenessProbe", "readinessProbe", "startupProbe"])
      if (c[p] && c[p].exec) programs.push(c[p].exec.command[0]);
    for (const prog of programs.filter(Boolean))
      if (!images[image][prog]) fail(x.where, `container ${c.name} runs ${prog}, which ${image} does not hold (images.txt)`);
    // The daemon's own check of its config, as the container would load it.
    const bin = binaryFor[c.command[0]];
    if (!bin) continue;
    const configArg = c.command[c.command.indexOf("--config") + 1];
    const env = dummyEnv(c);
    const cmFile = objects.find((y) => y.overlay === x.overlay && y.o.kind === "ConfigMap" &&
      (pod.volumes || []).some((v) => v.configMap && v.configMap.name === y.o.metadata.name) &&
      (y.o.data || {})[path.basename(configArg)] !== undefined);
    if (!cmFile) {
      fail(x.where, `container ${c.name}: no ConfigMap holds ${configArg}`);
      continue;
    }
    const text = cmFile.o.data[path.basename(configArg)];
    const values = text.split("\n").filter((l) => !/^\s*#/.test(l)).join("\n");
    for (const m of values.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g))
      if (env[m[1]] === undefined) fail(x.where, `container ${c.name}: ${path.basename(configArg)} uses \${${m[1]}}, which its env does not set`);
    if (!runDaemons) continue;
    const flag = bin.endsWith("dpu-dataplane") ? dataplaneCheck : "--check-config";
    const r = runInMounts(x, pod, c, [path.join(build, bin), "--config", configArg, flag], env);
    if (r.status !== 0)
      fail(x.where, `container ${c.name}: ${path.basename(bin)} ${flag} refused ${configArg}: ${(r.stderr + r.stdout).trim()}`);
  }
}

// --- 5. monitoring: what a PodMonitor scrapes exists and listens there --------
// Each PodMonitor must select the pods of a DaemonSet of its rendering (in its
// own namespace unless a namespaceSelector says otherwise); each endpoint's
// port must be a named container port of those pods, and the daemon in that
// container must listen on it (metrics.listen of its config file) with the
// scheme the endpoint uses (the agent's listener has TLS when api.tls is set;
// the dataplane's is plain HTTP). A Secret the endpoint reads must be rendered
// too or be one the install guide tells the operator to create.
const installDoc = fs.readFileSync(path.join(src, "docs", "install-kubernetes.md"), "utf8");
function configOf(overlay, pod, container) {
  const arg = (container.command || [])[(container.command || []).indexOf("--config") + 1];
  if (!arg) return null;
  const cm = objects.find((y) => y.overlay === overlay && y.o.kind === "ConfigMap" &&
    (pod.volumes || []).some((v) => v.configMap && v.configMap.name === y.o.metadata.name) &&
    (y.o.data || {})[path.basename(arg)] !== undefined);
  return cm ? YAML.parse(cm.o.data[path.basename(arg)]) : null;
}
for (const x of objects) {
  if (x.o.kind !== "PodMonitor") continue;
  const pm = x.o, spec = pm.spec || {};
  const ns = pm.metadata.namespace;
  const nsSel = spec.namespaceSelector || {};
  const inNamespace = (n) => nsSel.any === true || (nsSel.matchNames ? nsSel.matchNames.includes(n) : n === ns);
  if (!ns) fail(x.where, "has no namespace: it would land in the client's default namespace and select pods there");
  if ((spec.selector || {}).matchExpressions) fail(x.where, "selector.matchExpressions is not checked here: use matchLabels");
  const want = (spec.selector || {}).matchLabels || {};
  const selected = objects.filter((y) => y.overlay === x.overlay && y.o.kind === "DaemonSet" &&
    inNamespace(y.o.metadata.namespace) &&
    Object.entries(want).every(([k, v]) => (y.o.spec.template.metadata.labels || {})[k] === v));
  if (!selected.length) {
    fail(x.where, `selects no DaemonSet's pods (matchLabels ${JSON.stringify(want)}, namespace ${ns})`);
    continue;
  }
  for (const ds of selected) {
    const pod = ds.o.spec.template.spec;
    for (const ep of spec.podMetricsEndpoints || []) {
      const c = pod.containers.find((k) => (k.ports || []).some((p) => p.name === ep.port));
      if (!c) {
        fail(x.where, `endpoint port ${ep.port}: no container of ${ds.o.metadata.name} declares a port by that name`);
        continue;
      }
      const port = c.ports.find((p) => p.name === ep.port).containerPort;
      const cfg = configOf(x.overlay, pod, c);
      const listen = cfg && cfg.metrics && cfg.metrics.listen;
      if (!listen) {
        fail(x.where, `endpoint port ${ep.port}: container ${c.name}'s config sets no metrics.listen`);
        continue;
      }
      if (!String(listen).endsWith(":" + port))
        fail(x.where, `endpoint port ${ep.port} is ${port}, but container ${c.name} listens on ${listen}`);
      const tls = c.command[0] === "/usr/bin/dpu-agent" && cfg.api && cfg.api.tls && cfg.api.tls.cert;
      const scheme = ep.scheme || "http";
      if (scheme !== (tls ? "https" : "http"))
        fail(x.where, `endpoint port ${ep.port} scrapes with ${scheme}, but container ${c.name} serves ${tls ? "https" : "http"}`);
      const t = ep.tlsConfig || {};
      const secrets = [t.ca && t.ca.secret, t.cert && t.cert.secret, t.keySecret].filter(Boolean);
      for (const sec of secrets) {
        const made = objects.some((y) => y.overlay === x.overlay && y.o.kind === "Secret" && y.o.metadata.name === sec.name);
        const told = new RegExp(`create secret \\S+ ${sec.name}\\b[^\\n]*${sec.key.replace(".", "\\.")}`).test(installDoc);
        if (!made && !told)
          fail(x.where, `endpoint port ${ep.port} reads key ${sec.key} of Secret ${sec.name}, which nothing renders and ` +
               "docs/install-kubernetes.md does not tell how to create");
      }
    }
  }
}

// --- 6. what issue 17 asks of the deployment (requirements.js) ---------------
require("./requirements.js")({ objects, src, build, fail, runDaemons });

console.log(`${rendered.length} renderings, ${objects.length} objects checked, ${failures} problem(s)`);
process.exit(failures ? 1 : 0);
