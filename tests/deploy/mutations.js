#!/usr/bin/env node
// The checks can fail (ctest deploy_manifests_catch_mistakes): each mutation
// below breaks one promise of manifests/ in a copy of the tree, and
// check-manifests.js must refuse that copy with the words given. A check that
// a mutation slips past is a check that proves nothing.
//
//   node tests/deploy/mutations.js SOURCE_DIR BUILD_DIR
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");

const [src, build] = process.argv.slice(2);
const DPU = "manifests/base/dpu/daemonset.yaml", HOST = "manifests/base/host/daemonset.yaml";

// [what it breaks, file, pattern, replacement, what the checks must say, whether
// the daemons must run on the configs (slow: only where the mutation is a config)]
const mutations = [
  ["a typo in a field name", DPU, /^ {6}hostNetwork: true/m, "      hostNetwrok: true",
   'unknown field "spec.template.spec.hostNetwrok"'],
  ["a typo in the SCC (CRD schema, strict)", "manifests/overlays/openshift/scc.yaml", "allowHostIPC: false",
   "allowHostIPCs: false", "must NOT have additional properties"],
  ["a field Kubernetes 1.29 does not know (securityContext.appArmorProfile, 1.30)", DPU,
   /( {12}capabilities: \{drop: \[ALL\]\}\n)/, "$1            appArmorProfile: {type: RuntimeDefault}\n",
   "is not in Kubernetes 1.29's API"],
  ["the node-guard policy forgets an annotation the agent publishes", "manifests/components/node-guard/policy.yaml",
   "'dpu-cni.io/port-keys', ", "", "does not let dpu-agent write dpu-cni.io/port-keys"],
  ["the host side gets a service-account token", HOST, "automountServiceAccountToken: false",
   "automountServiceAccountToken: true", "the host side holds cluster credentials"],
  ["the host side's ServiceAccount is bound to a role", "manifests/base/agent-rbac/clusterrolebinding.yaml",
   /(subjects:\n)/, "$1  - {kind: ServiceAccount, name: dpu-cni-host, namespace: dpu-cni}\n",
   "grants the host side's ServiceAccount more than the use of its SCC"],
  ["a long-lived container mounts the CNI bin dir", HOST,
   /([\s\S]*- \{name: cni-conf, mountPath: \/host\/etc\/cni\/net.d\}\n)/,
   "$1            - {name: cni-bin, mountPath: /host/opt/cni/bin}\n", "the long-lived container cni-conf mounts the CNI bin dir"],
  ["host-shim listens where install-cni does not wait", "manifests/base/host/host-shim.yaml",
   /^socket: \/run\/dpu-cni\/host-shim.sock/m, "socket: /run/dpu-cni/shim.sock", "host-shim listens on /run/dpu-cni/shim.sock"],
  ["a capability the install guide does not document", DPU, "add: [NET_ADMIN, NET_RAW, IPC_LOCK, SYS_RAWIO]",
   "add: [NET_ADMIN, NET_RAW, IPC_LOCK, SYS_RAWIO, SYS_ADMIN]", "the install guide documents"],
  ["a privileged container", DPU, /( {12}allowPrivilegeEscalation: false\n)/,
   "$1            privileged: true\n", "is privileged"],
  ["the systemd unit's capabilities differ from the container's", "manifests/systemd/dpu-agent.service",
   /^CapabilityBoundingSet=$/m, "CapabilityBoundingSet=CAP_NET_ADMIN", "CapabilityBoundingSet [NET_ADMIN]"],
  ["no maxUnavailable", DPU, "      maxUnavailable: 1\n      maxSurge: 0\n", "      maxSurge: 0\n",
   "sets no updateStrategy.rollingUpdate.maxUnavailable"],
  ["the DPU pod no longer tolerates the DPU taint", DPU,
   "        - {key: dpu-cni.io/dpu, operator: Exists, effect: NoSchedule}\n", "", "does not tolerate the taint dpu-cni.io/dpu"],
  ["the dataplane asks for no hugepages", DPU, 'requests: {cpu: "2", memory: 1Gi, hugepages-2Mi: 1Gi, ',
   'requests: {cpu: "2", memory: 1Gi, ', "requests no hugepages"],
  ["a probe on an address the agent does not listen on", DPU,
   "livenessProbe:\n            tcpSocket: {host: 192.168.100.2, port: 9443}", "livenessProbe:\n            tcpSocket: {port: 9443}",
   "livenessProbe connects to <status.podIP>:9443"],
  ["a liveness probe a control-plane blip would trip", DPU,
   /(stats\]\}\n {12}periodSeconds: 10\n {12}timeoutSeconds: 5\n {12}failureThreshold: )6/, (all, head) => head + "2",
   "restarts it after 20 s"],
  ["a hostPath without a type", DPU, "hostPath: {path: /var/lib/dpu-agent, type: DirectoryOrCreate}",
   "hostPath: {path: /var/lib/dpu-agent}", "has no type"],
  ["a selector that misses the pod template", HOST, /(matchLabels:\n {6}app.kubernetes.io\/name: )dpu-cni-host/,
   "$1dpu-cni-hots", "does not match the pod template"],
  ["a config the agent refuses", "manifests/base/dpu/agent.yaml", /^tunnelIP:/m, "tunnelIp:", "--check-config refused", true],
  ["a conflist dpu-cni refuses", "manifests/base/host/10-dpu-cni.conflist", '"logLevel": "info"', '"logLevel": "chatty"',
   "dpu-cni does not accept the CNI config", true],
  ["the namespace stops admitting the pods", "manifests/base/namespace/namespace.yaml", "enforce: privileged",
   "enforce: baseline", "pod-security.kubernetes.io/enforce: privileged"],
  ["the agent may read Secrets", "manifests/base/agent-rbac/clusterrole.yaml",
   "resources: [nodes, pods, namespaces, services]", "resources: [nodes, pods, namespaces, services, secrets]", "grants Secrets"],
  ["the agent loses a verb", "manifests/base/agent-rbac/clusterrole.yaml", "    resources: [endpointslices]\n    verbs: [get, list, watch]",
   "    resources: [endpointslices]\n    verbs: [get, list]", "lacks discovery.k8s.io/endpointslices/watch"],
  ["the NAD loses the VF pool's resource name", "manifests/base/nad/network-attachment-definition.yaml",
   "k8s.v1.cni.cncf.io/resourceName: nvidia.com/bf_sriov_vf", "k8s.v1.cni.cncf.io/pool: nvidia.com/bf_sriov_vf",
   "k8s.v1.cni.cncf.io/resourceName"],
];

function copyTree(to) {
  for (const p of ["manifests", "CMakeLists.txt", "docs", "host-shim/tools",
    "dpu-agent/control/include/control/kube_objects.h", "dpu-agent/control/src/kube_node_publisher.cpp"]) {
    fs.mkdirSync(path.dirname(path.join(to, p)), { recursive: true });
    fs.cpSync(path.join(src, p), path.join(to, p), { recursive: true });
  }
  fs.mkdirSync(path.join(to, "tests"));
  fs.symlinkSync(__dirname, path.join(to, "tests", "deploy"));
}

function run(m) {
  const [what, file, pattern, replacement, expect, daemons] = m;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "dpu-mutation-"));
  copyTree(tmp);
  const f = path.join(tmp, file);
  const before = fs.readFileSync(f, "utf8");
  const after = before.replace(pattern, replacement);
  if (after === before) {
    fs.rmSync(tmp, { recursive: true, force: true });
    return Promise.resolve(`FAIL ${what}: the pattern no longer matches ${file} (update tests/deploy/mutations.js)`);
  }
  fs.writeFileSync(f, after);
  return new Promise((resolve) => {
    const child = spawn("node", [path.join(__dirname, "check-manifests.js"), tmp, build],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DPU_DEPLOY_RUN_DAEMONS: daemons ? "1" : "0" } });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("close", (code) => {
      fs.rmSync(tmp, { recursive: true, force: true });
      const line = out.split("\n").find((l) => l.includes(expect));
      if (code === 0) resolve(`FAIL ${what}: the checks accepted it`);
      else if (!line) resolve(`FAIL ${what}: refused, but not with "${expect}":\n${out}`);
      else resolve(`ok: ${what}: ${line.trim()}`);
    });
  });
}

(async () => {
  const results = [];
  // Two at a time: each renders every overlay and runs the daemons' config checks.
  for (let i = 0; i < mutations.length; i += 2)
    results.push(...(await Promise.all(mutations.slice(i, i + 2).map(run))));
  for (const r of results) console.log(r);
  const failed = results.filter((r) => r.startsWith("FAIL")).length;
  console.log(`${mutations.length} mutations, ${mutations.length - failed} refused as they should be, ${failed} not`);
  process.exit(failed ? 1 : 0);
})();
