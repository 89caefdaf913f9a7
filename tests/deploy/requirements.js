// What issue 17 asks of the deployment, checked on every rendering of
// manifests/ (called by check-manifests.js, step 6). Each rule names the
// requirement it proves, so a failure says which promise a change broke:
//
//  - the namespace admits the pods (Pod Security "privileged");
//  - the host side holds no cluster credentials (no service-account token,
//    no Secret but the host<->DPU TLS, no grant but the OpenShift SCC's `use`);
//  - the CNI install: host-shim is a sidecar started first, the run-once
//    install-cni after it is the only container with the CNI bin dir, the
//    long-lived ones never have it; install-cni, host-shim, the conflist and
//    the NetworkAttachmentDefinition agree on the socket, and dpu-cni itself
//    accepts the conflist and the NAD's config;
//  - the DPU DaemonSet: on DPU nodes by label and toleration of the taint the
//    install guide tells the operator to set, hostNetwork, dpu-dataplane and
//    dpu-agent as separate containers, hugepages and a device requested
//    explicitly, maxUnavailable (and no surge: one dataplane per NIC),
//    system-node-critical;
//  - least capabilities: every container drops ALL, is never privileged nor
//    escalates, and adds exactly what docs/install-kubernetes.md's table says
//    (and why); the OpenShift SCCs allow exactly the union of what their pods
//    add and are granted by `use`; the systemd units bound the same sets;
//  - probes survive a control-plane blip (liveness waits at least a minute,
//    no probe asks the API server) and point at what the daemons listen on
//    (tcpSocket: a listener of the daemon's config; exec: its own socket);
//  - the agent's ClusterRole is the list, with no Secrets and no
//    wildcard.
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const YAML = require("yaml");

const POD_IP = "<status.podIP>";

module.exports = function checkRequirements({ objects, src, build, fail, runDaemons = true }) {
  const installDoc = fs.readFileSync(path.join(src, "docs", "install-kubernetes.md"), "utf8");
  const byOverlay = new Map();
  for (const x of objects) {
    if (!byOverlay.has(x.overlay)) byOverlay.set(x.overlay, []);
    byOverlay.get(x.overlay).push(x);
  }

  // --- the capabilities table of the install guide --------------------------
  // | `container` | user | `CAP`, `CAP` (or none) | why |
  const documented = {};
  const section = /## What each container may do\n([\s\S]*?)(\n## |$)/.exec(installDoc);
  if (!section) fail("docs/install-kubernetes.md", 'has no section "## What each container may do" (the capabilities and why)');
  else {
    for (const line of section[1].split("\n")) {
      const m = /^\| `([a-z0-9-]+)` \|[^|]*\|([^|]*)\|([^|]*)\|/.exec(line);
      if (!m) continue;
      const caps = [...m[2].matchAll(/`([A-Z_]+)`/g)].map((c) => c[1]);
      if (!caps.length && !/none/.test(m[2])) fail("docs/install-kubernetes.md", `container ${m[1]}: say "none" or list the capabilities`);
      if (m[3].trim().length < 20) fail("docs/install-kubernetes.md", `container ${m[1]}: the table must say why`);
      documented[m[1]] = caps.sort();
    }
  }
  const same = (a, b) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

  const configText = (overlay, pod, file) => {
    const cm = (byOverlay.get(overlay) || []).find((y) => y.o.kind === "ConfigMap" &&
      (pod.volumes || []).some((v) => v.configMap && v.configMap.name === y.o.metadata.name) &&
      (y.o.data || {})[file] !== undefined);
    return cm ? cm.o.data[file] : null;
  };
  const argOf = (cmd, flag) => {
    const i = (cmd || []).indexOf(flag);
    return i >= 0 ? cmd[i + 1] : undefined;
  };
  // ${VAR} of a config, as the container's env sets it (a pod IP stays symbolic).
  const expand = (text, container) => text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (all, v) => {
    const e = (container.env || []).find((k) => k.name === v);
    if (!e) return all;
    if (e.value !== undefined) return e.value;
    const f = e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath;
    return f === "status.podIP" ? POD_IP : `<${f}>`;
  });
  const containerConfig = (overlay, pod, c) => {
    const arg = argOf(c.command, "--config");
    if (!arg) return null;
    const text = configText(overlay, pod, path.basename(arg));
    return text === null ? null : YAML.parse(expand(text, c));
  };
  // "ADDR:PORT" listeners of a daemon's config.
  const listeners = (c, cfg) => {
    const out = [];
    if (!cfg) return out;
    if (c.command[0] === "/usr/bin/dpu-agent" && cfg.api) out.push(`${cfg.api.address}:${cfg.api.port}`);
    if (cfg.metrics && cfg.metrics.listen) out.push(String(cfg.metrics.listen));
    return out;
  };

  // dpu-cni's own view of a CNI config: STATUS with the socket absent must
  // fail only because host-shim does not answer (a config error is worded
  // otherwise). /run is a private tmpfs, so no host-shim of this machine answers.
  const cniAccepts = (where, config) => {
    if (!runDaemons) return;
    const r = spawnSync("unshare", ["-m", "--propagation", "private", "sh", "-c",
      'mount -t tmpfs tmpfs /run && exec "$@"', "sh", path.join(build, "cni", "dpu-cni")],
    { input: config, encoding: "utf8", env: { ...process.env, CNI_COMMAND: "STATUS", CNI_PATH: "/nonexistent" } });
    if (!/host-shim is unreachable/.test(r.stdout))
      fail(where, `dpu-cni does not accept the CNI config: ${(r.stdout + r.stderr).trim()}`);
  };

  for (const [overlay, objs] of byOverlay) {
    const find = (kind, name) => objs.find((y) => y.o.kind === kind && (!name || y.o.metadata.name === name));
    const daemonSets = objs.filter((y) => y.o.kind === "DaemonSet");
    const bindingsOf = (sa, ns) => objs.filter((y) => /RoleBinding$/.test(y.o.kind) &&
      (y.o.subjects || []).some((s) => s.kind === "ServiceAccount" && s.name === sa && s.namespace === ns));
    const roleOf = (b) => objs.find((y) => y.o.kind === b.o.roleRef.kind && y.o.metadata.name === b.o.roleRef.name &&
      (b.o.roleRef.kind === "ClusterRole" || y.o.metadata.namespace === b.o.metadata.namespace));

    for (const x of daemonSets) {
      const ds = x.o, pod = ds.spec.template.spec, ns = ds.metadata.namespace;
      const component = (ds.metadata.labels || {})["app.kubernetes.io/component"];
      const all = [...(pod.initContainers || []), ...pod.containers];

      // The namespace admits privileged-level pods.
      const nsObj = find("Namespace", ns);
      if (!nsObj) fail(x.where, `its namespace ${ns} is not rendered with it`);
      else if ((nsObj.o.metadata.labels || {})["pod-security.kubernetes.io/enforce"] !== "privileged")
        fail(nsObj.where, 'needs the label pod-security.kubernetes.io/enforce: privileged (host network, host paths, capabilities)');

      if (!pod.hostNetwork) fail(x.where, "must run with hostNetwork: true (it is the node's network)");
      const ru = (ds.spec.updateStrategy || {}).rollingUpdate || {};
      if (ru.maxUnavailable === undefined) fail(x.where, "sets no updateStrategy.rollingUpdate.maxUnavailable");
      const pc = pod.priorityClassName;
      if (pc !== "system-node-critical" && !(pc && find("PriorityClass", pc)))
        fail(x.where, `priorityClassName ${pc}: use system-node-critical or render the PriorityClass`);

      // Least capabilities, as documented.
      for (const c of all) {
        const sc = c.securityContext || {};
        const caps = sc.capabilities || {};
        if (!(caps.drop || []).includes("ALL")) fail(x.where, `container ${c.name} does not drop ALL capabilities`);
        if (sc.privileged) fail(x.where, `container ${c.name} is privileged`);
        if (sc.allowPrivilegeEscalation !== false) fail(x.where, `container ${c.name} does not set allowPrivilegeEscalation: false`);
        if (!(c.name in documented))
          fail(x.where, `container ${c.name} is not in the table of docs/install-kubernetes.md ("What each container may do")`);
        else if (!same(caps.add || [], documented[c.name]))
          fail(x.where, `container ${c.name} adds capabilities [${caps.add || []}], the install guide documents ` +
               `[${documented[c.name]}]`);
      }

      // Probes: a control-plane blip restarts nothing; each probe asks the daemon itself.
      for (const c of all) {
        const cfg = containerConfig(overlay, pod, c);
        for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"]) {
          const p = c[kind];
          if (!p) continue;
          if (p.httpGet) fail(x.where, `container ${c.name}: ${kind} is an HTTP GET; probe the listener or the socket ` +
                              "(an HTTP health endpoint follows the API server)");
          if (kind === "livenessProbe" && (p.failureThreshold || 3) * (p.periodSeconds || 10) < 60)
            fail(x.where, `container ${c.name}: livenessProbe restarts it after ${(p.failureThreshold || 3) * (p.periodSeconds || 10)} s ` +
                 "of silence; a control-plane blip must not (at least 60 s)");
          if (p.tcpSocket) {
            let port = p.tcpSocket.port;
            if (typeof port === "string") port = ((c.ports || []).find((q) => q.name === port) || {}).containerPort;
            const target = `${p.tcpSocket.host || POD_IP}:${port}`;
            const l = listeners(c, cfg);
            if (!l.includes(target))
              fail(x.where, `container ${c.name}: ${kind} connects to ${target}, but the daemon listens on ` +
                   `${l.join(", ") || "nothing its config names"}`);
          }
          if (p.exec) {
            const cmd = p.exec.command, sock = argOf(cmd, "--socket");
            if (/dpuctl$/.test(cmd[0]) && sock !== ((cfg || {}).sockets || {}).operator)
              fail(x.where, `container ${c.name}: ${kind} runs dpuctl on ${sock}, the dataplane's operator socket is ` +
                   `${((cfg || {}).sockets || {}).operator}`);
          }
        }
      }

      if (component === "host") {
        // No cluster credentials on the host.
        if (pod.automountServiceAccountToken !== false)
          fail(x.where, "the host side holds cluster credentials: set automountServiceAccountToken: false");
        const sa = find("ServiceAccount", pod.serviceAccountName || "default");
        if (sa && sa.o.automountServiceAccountToken !== false)
          fail(sa.where, "the host side's ServiceAccount must say automountServiceAccountToken: false");
        for (const v of pod.volumes || []) {
          if (v.projected && (v.projected.sources || []).some((s) => s.serviceAccountToken || s.secret))
            fail(x.where, `volume ${v.name} projects a token or Secret into the host side`);
          if (v.secret && v.secret.secretName !== "dpu-cni-host-tls")
            fail(x.where, `volume ${v.name}: the host side may hold only its TLS Secret, not ${v.secret.secretName}`);
        }
        for (const c of all)
          for (const e of [...(c.env || []), ...(c.envFrom || [])])
            if ((e.valueFrom && e.valueFrom.secretKeyRef) || e.secretRef) fail(x.where, `container ${c.name} reads a Secret into its env`);
        for (const b of bindingsOf(pod.serviceAccountName, ns)) {
          const role = roleOf(b);
          const onlyScc = role && (role.o.rules || []).every((r) => same(r.verbs, ["use"]) &&
            same(r.resources, ["securitycontextconstraints"]));
          if (!onlyScc) fail(b.where, `grants the host side's ServiceAccount more than the use of its SCC`);
        }

        // The CNI install.
        const init = pod.initContainers || [];
        const hostShimAt = init.findIndex((c) => c.restartPolicy === "Always" && c.command[0] === "/usr/bin/host-shim");
        const installAt = init.findIndex((c) => /install-cni$/.test(c.command[0]) && c.command[1] === "install");
        if (hostShimAt < 0) fail(x.where, "host-shim is not a sidecar (an init container with restartPolicy: Always)");
        if (installAt < 0) fail(x.where, "no run-once init container runs install-cni install");
        if (hostShimAt < 0 || installAt < 0) continue;
        if (installAt < hostShimAt) fail(x.where, "install-cni runs before host-shim's sidecar starts");
        const installer = init[installAt], hostShim = init[hostShimAt];
        if (installer.restartPolicy) fail(x.where, "install-cni must run once (no restartPolicy)");
        const mountOf = (c, dir) => (c.volumeMounts || []).find((m) => dir === m.mountPath || dir.startsWith(m.mountPath + "/"));
        const binMount = mountOf(installer, argOf(installer.command, "--bin-dir") || "");
        if (!binMount) fail(x.where, "install-cni's --bin-dir is not a mounted volume");
        else {
          const binVol = (pod.volumes || []).find((v) => v.name === binMount.name);
          if (!binVol || !binVol.hostPath) fail(x.where, "install-cni's --bin-dir is not the host's CNI bin dir (a hostPath)");
          for (const c of [...init.filter((k) => k.restartPolicy === "Always"), ...pod.containers])
            if ((c.volumeMounts || []).some((m) => {
              const v = (pod.volumes || []).find((k) => k.name === m.name);
              return v && v.hostPath && binVol && binVol.hostPath && v.hostPath.path === binVol.hostPath.path;
            }))
              fail(x.where, `the long-lived container ${c.name} mounts the CNI bin dir ${binVol.hostPath.path}`);
        }
        const hsText = configText(overlay, pod, path.basename(argOf(hostShim.command, "--config") || ""));
        const hsSocket = hsText && YAML.parse(hsText).socket;
        const conflistArg = argOf(installer.command, "--conflist") || "";
        const conflist = configText(overlay, pod, path.basename(conflistArg));
        if (!conflist) {
          fail(x.where, `install-cni's conflist ${conflistArg} is in no ConfigMap of the pod`);
          continue;
        }
        const plugins = JSON.parse(conflist).plugins || [];
        for (const c of init.concat(pod.containers).filter((k) => /install-cni$/.test(k.command[0]))) {
          if (argOf(c.command, "--socket") !== hsSocket)
            fail(x.where, `${c.name} waits for host-shim on ${argOf(c.command, "--socket")}, host-shim listens on ${hsSocket}`);
          const m = mountOf(c, path.dirname(argOf(c.command, "--socket") || "/"));
          if (!m || !mountOf(hostShim, path.dirname(hsSocket || "/")) || mountOf(hostShim, path.dirname(hsSocket)).name !== m.name)
            fail(x.where, `${c.name} does not share host-shim's socket directory`);
        }
        for (const p of plugins.filter((k) => k.type === "dpu-cni"))
          if ((p.socket || "/run/dpu-cni/host-shim.sock") !== hsSocket)
            fail(x.where, `the conflist's dpu-cni talks to ${p.socket}, host-shim listens on ${hsSocket}`);
        // The runtime hands each plugin its own config with the list's name and version.
        const list = JSON.parse(conflist);
        for (const p of plugins)
          if (p.type === "dpu-cni")
            cniAccepts(`${x.where} (conflist)`, JSON.stringify({ cniVersion: list.cniVersion, name: list.name, ...p }));
        for (const nad of objs.filter((y) => y.o.kind === "NetworkAttachmentDefinition")) {
          if (!((nad.o.metadata.annotations || {})["k8s.v1.cni.cncf.io/resourceName"] || "").includes("/"))
            fail(nad.where, "needs the annotation k8s.v1.cni.cncf.io/resourceName naming the VF pool (VENDOR/NAME)");
          const config = JSON.parse(nad.o.spec.config);
          if (config.type !== "dpu-cni" || (config.socket || "/run/dpu-cni/host-shim.sock") !== hsSocket)
            fail(nad.where, `its config must be dpu-cni on host-shim's socket ${hsSocket}`);
          cniAccepts(nad.where, nad.o.spec.config);
        }
      }

      if (component === "dpu") {
        // On DPU nodes only, by label and toleration of the guide's taint.
        const sel = Object.entries(pod.nodeSelector || {}).filter(([k]) => k !== "kubernetes.io/os");
        if (!sel.length) fail(x.where, "selects no DPU nodes by label (nodeSelector)");
        for (const [k, v] of sel) {
          if (!new RegExp(`kubectl label node \\S+ .*\\b${k.replace(/[./]/g, "\\$&")}=${v}\\b`).test(installDoc))
            fail(x.where, `nodeSelector ${k}=${v}: docs/install-kubernetes.md does not tell how to label the DPU nodes so`);
          const taint = new RegExp(`kubectl taint node \\S+ ${k.replace(/[./]/g, "\\$&")}=(\\S+):NoSchedule`).exec(installDoc);
          if (!taint) fail(x.where, `docs/install-kubernetes.md does not taint the DPU nodes ${k}=...:NoSchedule`);
          else if (!(pod.tolerations || []).some((t) => t.key === k && (t.effect || "NoSchedule") === "NoSchedule" &&
              (t.operator === "Exists" || t.value === taint[1])))
            fail(x.where, `does not tolerate the taint ${k}=${taint[1]}:NoSchedule the install guide sets`);
        }
        if (ru.maxSurge !== 0) fail(x.where, "maxSurge must be 0: two dataplanes never share one NIC");
        const dp = pod.containers.find((c) => c.command[0] === "/usr/bin/dpu-dataplane");
        const agent = pod.containers.find((c) => c.command[0] === "/usr/bin/dpu-agent");
        if (!dp || !agent || dp === agent) fail(x.where, "dpu-dataplane and dpu-agent must be separate containers");
        if (dp) {
          const req = (dp.resources || {}).requests || {}, lim = (dp.resources || {}).limits || {};
          const huge = Object.keys(req).filter((k) => k.startsWith("hugepages-"));
          if (!huge.length) fail(x.where, "dpu-dataplane requests no hugepages");
          for (const h of huge) if (lim[h] !== req[h]) fail(x.where, `dpu-dataplane: ${h} limit must equal its request`);
          if (!(pod.volumes || []).some((v) => v.emptyDir && /^HugePages/.test(v.emptyDir.medium || "")))
            fail(x.where, "no hugepages volume (emptyDir medium HugePages-*) for the dataplane");
          const devices = Object.keys(req).filter((k) => k.includes("/"));
          if (!devices.length) fail(x.where, "dpu-dataplane requests no device (the NIC, from a device plugin)");
          for (const d of devices) if (lim[d] !== req[d]) fail(x.where, `dpu-dataplane: ${d} limit must equal its request`);
        }
      }

      // OpenShift: the SCC the pod names allows exactly what it asks and is granted by `use`.
      const required = ((ds.spec.template.metadata || {}).annotations || {})["openshift.io/required-scc"];
      if (required) {
        const scc = find("SecurityContextConstraints", required);
        if (!scc) fail(x.where, `openshift.io/required-scc names ${required}, which is not rendered`);
        else {
          const s = scc.o, union = [...new Set(all.flatMap((c) => ((c.securityContext || {}).capabilities || {}).add || []))];
          if (!same(s.allowedCapabilities || [], union))
            fail(scc.where, `allowedCapabilities [${s.allowedCapabilities}] must be exactly what ${ds.metadata.name} adds: [${union}]`);
          if (s.allowPrivilegedContainer) fail(scc.where, "allows privileged containers");
          if (pod.hostNetwork && !s.allowHostNetwork) fail(scc.where, "does not allow the host network the pod uses");
          const types = (pod.volumes || []).map((v) => Object.keys(v).find((k) => k !== "name"));
          for (const t of new Set(types)) if (!(s.volumes || []).includes(t)) fail(scc.where, `does not allow ${t} volumes the pod uses`);
          const granted = bindingsOf(pod.serviceAccountName, ns).some((b) => {
            const role = roleOf(b);
            return role && (role.o.rules || []).some((r) => r.verbs.includes("use") &&
              r.resources.includes("securitycontextconstraints") && (!r.resourceNames || r.resourceNames.includes(required)));
          });
          if (!granted) fail(x.where, `its ServiceAccount ${pod.serviceAccountName} is not granted "use" of SCC ${required}`);
        }
      }
    }

    // The agent's ClusterRole: the list, nothing on Secrets, no wildcard.
    const role = find("ClusterRole", "dpu-agent");
    if (role) {
      const want = new Set();
      for (const r of ["nodes", "pods", "namespaces", "services"]) for (const v of ["get", "list", "watch"]) want.add(`/${r}/${v}`);
      for (const v of ["get", "list", "watch"]) {
        want.add(`discovery.k8s.io/endpointslices/${v}`);
        want.add(`networking.k8s.io/networkpolicies/${v}`);
      }
      want.add("/nodes/patch");
      const got = new Set();
      for (const r of role.o.rules || []) {
        if (r.resourceNames || r.nonResourceURLs) fail(role.where, "has a rule with resourceNames or nonResourceURLs");
        for (const g of r.apiGroups || []) for (const res of r.resources || []) for (const v of r.verbs || []) {
          if (g === "*" || res === "*" || v === "*") fail(role.where, "grants a wildcard");
          if (res === "secrets") fail(role.where, "grants Secrets");
          got.add(`${g}/${res}/${v}`);
        }
      }
      for (const g of want) if (!got.has(g)) fail(role.where, `lacks ${g}`);
      for (const g of got) if (!want.has(g)) fail(role.where, `grants ${g}, beyond what the agent needs`);
    }
  }

  // --- node-guard: the admission policy lets the agent write what it publishes --
  // The annotations kube_node_publisher.cpp writes (its k...Annotation
  // constants, spelled in kube_objects.h) must be the policy's `ours` list, its
  // refusal message and the install guide's paragraph: a new annotation the
  // policy does not know makes every Node update of the agent fail on a real
  // cluster, and the fake API server does not evaluate admission policies.
  {
    const control = path.join(src, "dpu-agent", "control");
    const constants = fs.readFileSync(path.join(control, "include", "control", "kube_objects.h"), "utf8");
    const publisher = fs.readFileSync(path.join(control, "src", "kube_node_publisher.cpp"), "utf8");
    const published = new Set();
    for (const m of publisher.matchAll(/\b(k\w+Annotation)\b/g)) {
      const c = new RegExp(`${m[1]} = "([^"]+)"`).exec(constants);
      if (!c) fail("dpu-agent/control/src/kube_node_publisher.cpp", `${m[1]} is not spelled in kube_objects.h`);
      else published.add(c[1]);
    }
    if (!published.size) fail("dpu-agent/control/src/kube_node_publisher.cpp", "names no k...Annotation constant");
    const guards = objects.filter((y) => y.o.kind === "ValidatingAdmissionPolicy" &&
      y.o.metadata.name === "dpu-cni-node-annotations");
    for (const g of guards) {
      const ours = ((g.o.spec.variables || []).find((v) => v.name === "ours") || {}).expression || "";
      const allowed = new Set([...ours.matchAll(/'([^']+)'/g)].map((m) => m[1]));
      for (const a of published) if (!allowed.has(a)) fail(g.where, `does not let dpu-agent write ${a}, which it publishes`);
      for (const a of allowed) if (!published.has(a)) fail(g.where, `lets dpu-agent write ${a}, which it never publishes`);
      for (const v of g.o.spec.validations || [])
        if (/may change only the annotations/.test(v.message || ""))
          for (const a of published) if (!v.message.includes(a)) fail(g.where, `its refusal message omits ${a}`);
    }
    const guide = /a node update by the agent may change only\s+([\s\S]*?)\(not spec/.exec(installDoc);
    if (!guide) fail("docs/install-kubernetes.md", "does not say which annotations the node-guard policy allows");
    else for (const a of published) if (!guide[1].includes(a)) fail("docs/install-kubernetes.md", `node-guard paragraph omits ${a}`);
  }

  // --- systemd units: the containers' capability sets ------------------------
  const unit = (name) => fs.readFileSync(path.join(src, "manifests", "systemd", name), "utf8");
  const bound = (text, key) => {
    const m = new RegExp(`^${key}=(.*)$`, "m").exec(text);
    return m ? m[1].trim().split(/\s+/).filter(Boolean).map((c) => c.replace(/^CAP_/, "")) : null;
  };
  for (const [file, container] of [["dpu-dataplane.service", "dpu-dataplane"],
    ["dpu-dataplane-standby.service", "dpu-dataplane"], ["dpu-agent.service", "dpu-agent"]]) {
    const text = unit(file), want = documented[container] || [];
    const b = bound(text, "CapabilityBoundingSet");
    if (!b || !same(b, want)) fail(`manifests/systemd/${file}`, `CapabilityBoundingSet [${b}] must be the container's [${want}]`);
    const a = bound(text, "AmbientCapabilities") || [];
    if (!same(a, want)) fail(`manifests/systemd/${file}`, `AmbientCapabilities [${a}] must be the container's [${want}]`);
    for (const m of text.matchAll(/^Exec\w*=(\S+)/gm))
      if (!fs.readFileSync(path.join(src, "manifests", "images.txt"), "utf8").includes(` ${m[1]} `))
        fail(`manifests/systemd/${file}`, `runs ${m[1]}, which no image holds (manifests/images.txt)`);
  }
};
