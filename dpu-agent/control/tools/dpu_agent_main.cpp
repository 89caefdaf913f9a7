// dpu-agent: the DPU control plane daemon. Reads its config, restores its
// checkpoint, learns the cluster from a ClusterSource, serves the attach API to
// host-shim and programs dpu-dataplane with the logical model (and, with
// ipsec, the node's IPsec SAs). Runs until SIGTERM/SIGINT; SIGUSR1 starts an
// IPsec key rotation, as does `dpuctl ipsec rotate` (through the dataplane).
//
//   dpu-agent --config /etc/dpu-agent/config.yaml [--check-config]
//   dpu-agent --decode FILE|-     decode Kubernetes YAML/JSON objects as the agent would (see decodeMain)
#include <signal.h>

#include <chrono>
#include <cstring>
#include <map>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/version.h"
#include "control/agent.h"
#include "control/agent_config.h"
#include "control/api_router.h"
#include "control/api_server.h"
#include "control/dataplane_client.h"
#include "control/file_source.h"
#include "control/ipsec_controller.h"
#include "control/kube_objects.h"
#include "control/metrics.h"
#if DPU_HAVE_KUBE_SOURCE
#include "control/kube_node_label.h"
#include "control/kube_source.h"
#endif

namespace {

using namespace dpu::control;

constexpr const char* kVersion = DPU_VERSION;
constexpr const char* kLog = "dpu-agent";

int usage(const char* argv0, int code) {
  (code ? std::cerr : std::cout) << "usage: " << argv0 << " --config FILE [--check-config]\n"
                                 << "       " << argv0 << " --decode FILE\n"
                                 << "  --config FILE    the agent configuration (JSON or YAML)\n"
                                 << "  --check-config   validate the configuration and exit\n"
                                 << "  --decode FILE    decode the Kubernetes objects of a YAML or JSON file (- for stdin)\n"
                                 << "                   as the agent's Kubernetes source does; print them as JSON\n";
  return code;
}

// --decode: every object of a `kubectl apply -f` style file, decoded by the
// Kubernetes source's decoder, printed as one JSON document
//   {"objects": [{"where": "FILE document 1", "kind": "Service", "namespace": ..., ...}, ...],
//    "refused": [{"where": "FILE document 2", "kind": ..., "namespace": ..., "name": ..., "error": ...}, ...]}
// Exit 0 when every object decoded, 1 when some were refused, 2 when the
// file cannot be read or is not YAML/JSON (the reason on stderr).
int decodeMain(const std::string& path) {
  dpu::Result<std::string> text = dpu::Error{""};
  if (path == "-") text = std::string(std::istreambuf_iterator<char>(std::cin), {});
  else text = dpu::readFile(path);
  if (!text) {
    std::cerr << "dpu-agent: --decode: " << text.error() << "\n";
    return 2;
  }
  auto docs = decodeKubeDocuments(*text, path == "-" ? "stdin" : path);
  if (!docs) {
    std::cerr << "dpu-agent: --decode: " << docs.error() << "\n";
    return 2;
  }
  nlohmann::json out = {{"objects", nlohmann::json::array()}, {"refused", nlohmann::json::array()}};
  for (const auto& d : *docs) {
    if (d.object.ok()) {
      // Where it came from, so a consumer that takes only some kinds
      // (dpu-lab apply) can name the document it refuses.
      nlohmann::json object = toJson(d.object);
      object["where"] = d.where;
      out["objects"].push_back(std::move(object));
      continue;
    }
    out["refused"].push_back({{"where", d.where},
                              {"kind", d.kind},
                              {"namespace", d.object.ns},
                              {"name", d.object.name},
                              {"error", d.object.error}});
  }
  std::cout << out.dump(2) << "\n";
  return out["refused"].empty() ? 0 : 1;
}

dpu::Result<std::unique_ptr<ClusterSource>> makeSource(const AgentConfig& config) {
  if (config.cluster_source.kind == ClusterSourceKind::kFile) {
    auto src = std::make_unique<FileClusterSource>(config.cluster_source.file_path);
    std::vector<std::string> cidrs;
    for (const auto& c : config.pod_cidrs) cidrs.push_back(c.str());
    src->setPublishedPodCidrs(cidrs);
    return std::unique_ptr<ClusterSource>(std::move(src));
  }
#if DPU_HAVE_KUBE_SOURCE
  KubeSourceConfig k;
  k.kubeconfig = config.cluster_source.in_cluster ? "" : config.cluster_source.kubeconfig;
  k.kube_context = config.cluster_source.kube_context;
  if (!config.cluster_source.in_cluster_dir.empty()) k.in_cluster_dir = config.cluster_source.in_cluster_dir;
  k.api_server = config.cluster_source.api_server;
  k.node_name = config.node_name;
  auto src = makeKubernetesSource(k);
  if (!src) return dpu::prefixed("config.clusterSource.kubernetes", std::move(src).takeError());
  return std::move(*src);
#else
  return dpu::Error{"config.clusterSource.type: \"kubernetes\" is not built into this dpu-agent "
                    "(dpu_control_kube was not part of the build); use \"file\""};
#endif
}

// The host's node name from the label on the DPU's own Node, retried until it
// is there (an operator may label the node after the pod started): the agent
// cannot serve anything before it knows which host it serves.
dpu::Result<std::string> resolveNodeName(const AgentConfig& config, const sigset_t& stop_signals) {
#if DPU_HAVE_KUBE_SOURCE
  const NodeNameFrom& from = config.node_name_from;
  const ClusterSourceConfig& cs = config.cluster_source;
  std::string in_cluster_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  dpu::Result<KubeConnection> conn = dpu::Error{"no connection"};
  if (from.in_cluster) conn = loadInClusterConfig(in_cluster_dir);
  else if (!from.kubeconfig.empty()) conn = loadKubeconfig(from.kubeconfig);
  else if (cs.in_cluster) conn = loadInClusterConfig(cs.in_cluster_dir.empty() ? in_cluster_dir : cs.in_cluster_dir, cs.api_server);
  else conn = loadKubeconfig(cs.kubeconfig, cs.kube_context);
  if (!conn) return dpu::prefixed("config.nodeName", std::move(conn).takeError());
  std::string last;
  while (true) {
    auto name = readNodeLabel(*conn, from.node, from.label);
    if (name) {
      DPU_LOG(kInfo, kLog) << "this DPU serves node " << *name << " (label " << from.label << " of Node " << from.node << ")";
      return name;
    }
    if (name.error() != last) {
      DPU_LOG(kWarn, kLog) << name.error() << "; retrying";
    }
    last = name.error();
    const timespec wait{2, 0};
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) return dpu::Error{"stopped", dpu::ErrorCode::kClosed};
  }
#else
  (void)stop_signals;
  return dpu::Error{"config.nodeName: reading it from label " + config.node_name_from.label +
                    " needs the Kubernetes client, which is not built into this dpu-agent"};
#endif
}

std::string metricsText(const Agent& agent, const ClusterSource& source, const DataplaneClient& client,
                        const Histogram& programming, const ModelState& model, const IpsecController* ipsec) {
  PromWriter w;
  w.gauge("dpu_agent_attachments", "Attachments (pods and the management port) on this DPU.",
          static_cast<double>(agent.attachmentCount()));
  std::vector<std::pair<Labels, double>> used, cap;
  for (const auto& u : agent.ipamUsage()) {
    used.push_back({{{"cidr", u.cidr}}, static_cast<double>(u.used)});
    cap.push_back({{{"cidr", u.cidr}}, static_cast<double>(u.capacity)});
  }
  w.family("dpu_agent_ipam_addresses_used", "gauge", "Pod addresses in use, by pod CIDR.", used);
  w.family("dpu_agent_ipam_addresses_capacity", "gauge", "Pod addresses assignable, by pod CIDR.", cap);
  w.gauge("dpu_agent_logical_ports", "Logical ports in the model.", static_cast<double>(model.portCount()));
  w.gauge("dpu_agent_remote_nodes", "Remote nodes (tunnel endpoints) in the model.",
          static_cast<double>(model.remoteNodeCount()));
  w.gauge("dpu_agent_services", "Services in the model (proxied, with a cluster IP, accepted by the model's rules).",
          static_cast<double>(model.serviceCount()));
  std::vector<std::pair<Labels, double>> refused;
  for (const auto& [name, why] : agent.refusedServices()) refused.push_back({{{"service", name}}, 1});
  w.family("dpu_agent_service_refused", "gauge",
           "1 for each Service left out of the dataplane as invalid (the agent's log says why).", refused);
  w.gauge("dpu_agent_port_policies", "Ports with NetworkPolicy rules (isolated in some direction) in the model.",
          static_cast<double>(model.portPolicyCount()));
  std::vector<std::pair<Labels, double>> refused_policies;
  for (const auto& [name, why] : agent.refusedPolicies()) refused_policies.push_back({{{"networkpolicy", name}}, 1});
  w.family("dpu_agent_networkpolicy_refused", "gauge",
           "1 for each NetworkPolicy left out as invalid (the agent's log names the field); the others are enforced.",
           refused_policies);
  auto s = source.stats();
  Labels src{{"source", source.kind()}};
  w.counter("dpu_agent_cluster_watch_restarts_total", "Cluster watch streams resumed or relisted.",
            static_cast<double>(s.watch_restarts), src);
  w.counter("dpu_agent_cluster_relists_total", "Cluster relists (410 Gone) or file reloads.", static_cast<double>(s.relists),
            src);
  w.counter("dpu_agent_cluster_malformed_objects_total", "Cluster objects (or files) skipped as malformed.",
            static_cast<double>(s.malformed), src);
  std::vector<std::pair<Labels, double>> by_kind;
  for (size_t i = 0; i < kObjectKindCount; ++i)
    by_kind.push_back({{{"source", source.kind()}, {"kind", objectKindName(static_cast<ObjectKind>(i))}},
                       static_cast<double>(s.events_by_kind[i])});
  w.family("dpu_agent_cluster_events_total", "counter", "Cluster changes delivered, by kind of object.", by_kind);
  w.gauge("dpu_agent_cluster_synced", "1 when the cluster source completed its first sync.", s.synced ? 1 : 0, src);
  w.counter("dpu_agent_released_orphan_attachments_total", "Attachments released because their pod is gone.",
            static_cast<double>(agent.releasedOrphans()));
  w.counter("dpu_agent_reconcile_released_attachments_total",
            "Pod attachments released because host-shim's list did not hold them.",
            static_cast<double>(agent.releasedByReconcile()));
  auto d = client.status();
  w.gauge("dpu_agent_dataplane_connected", "1 while connected to dpu-dataplane.", d.connected ? 1 : 0);
  w.gauge("dpu_agent_dataplane_generation", "Model generation the dataplane acknowledged.", static_cast<double>(d.generation));
  w.gauge("dpu_agent_model_changes_unacknowledged",
          "Changes to the agent's model the dataplane has not acknowledged yet (0: it forwards with all of them).",
          static_cast<double>(model.unacknowledgedChanges()));
  w.counter("dpu_agent_dataplane_full_syncs_total", "Full syncs sent and acknowledged.", static_cast<double>(d.full_syncs));
  w.counter("dpu_agent_dataplane_deltas_total", "Deltas sent and acknowledged.", static_cast<double>(d.deltas));
  w.counter("dpu_agent_dataplane_resyncs_requested_total", "RESYNC_NEEDED answers.", static_cast<double>(d.resyncs_requested));
  w.counter("dpu_agent_dataplane_reconnects_total", "Reconnects to the dataplane.", static_cast<double>(d.reconnects));
  w.counter("dpu_agent_dataplane_refused_total", "Programming requests the dataplane refused as invalid.",
            static_cast<double>(d.refused));
  w.gauge("dpu_agent_dataplane_port_capacity",
          "Representor ports the dataplane can open (attachments beyond it are refused); 0 until it says.",
          static_cast<double>(d.port_capacity));
  w.gauge("dpu_agent_dataplane_ports_unavailable",
          "Attachments whose representor port the dataplane could not open (it retries; CHECK fails for them).",
          static_cast<double>(d.ports_unavailable));
  w.counter("dpu_agent_dataplane_status_polls_total", "Status requests the dataplane answered (its problems).",
            static_cast<double>(d.status_polls));
  // What the dataplane does not forward for, by kind and state (every pair,
  // zeros too, so an alert has a series to watch), and one series per object.
  std::map<std::pair<std::string, std::string>, double> counts;
  auto kind = [](dpv1::ObjectProblem::Kind k) -> std::string {
    switch (k) {
      case dpv1::ObjectProblem::PORT: return "port";
      case dpv1::ObjectProblem::REMOTE_NODE: return "remote_node";
      case dpv1::ObjectProblem::LOCAL_SUBNET: return "local_subnet";
      case dpv1::ObjectProblem::IPSEC_SA: return "ipsec_sa";
      case dpv1::ObjectProblem::SERVICE: return "service";
      default: return "unknown";
    }
  };
  auto state = [](dpv1::ObjectProblem::State st) -> std::string {
    return st == dpv1::ObjectProblem::PORT_UNAVAILABLE ? "port_unavailable" : "refused";
  };
  for (const char* k : {"port", "remote_node", "local_subnet", "ipsec_sa", "service"}) {
    for (const char* st : {"refused", "port_unavailable"}) counts[{k, st}] = 0;
  }
  std::vector<std::pair<Labels, double>> objects;
  for (const auto& p : d.problems) {
    ++counts[{kind(p.kind()), state(p.state())}];
    objects.push_back({{{"kind", kind(p.kind())}, {"name", p.name()}, {"state", state(p.state())}}, 1});
  }
  std::vector<std::pair<Labels, double>> problems_by_kind;
  for (const auto& [k, v] : counts) problems_by_kind.push_back({{{"kind", k.first}, {"state", k.second}}, v});
  w.family("dpu_agent_dataplane_problems", "gauge",
           "Model objects the dataplane does not forward for (refused, or their port could not be opened).", problems_by_kind);
  w.family("dpu_agent_dataplane_object_problem", "gauge",
           "1 for each model object the dataplane does not forward for (dpuctl problems says why).", objects);
  std::map<std::string, double> states{{"programmed", 0}, {"pending", 0}, {"refused", 0}, {"port_unavailable", 0},
                                       {"dataplane_down", 0}};
  const auto attachments = agent.list();
  for (const auto& a : attachments.attachments()) {
    const std::string& st = a.dataplane_state();
    if (st == kProgrammed || st == kPending) ++states[st];
    else if (st.rfind("refused", 0) == 0) ++states["refused"];
    else if (st.rfind("port unavailable", 0) == 0) ++states["port_unavailable"];
    else ++states["dataplane_down"];
  }
  std::vector<std::pair<Labels, double>> by_state;
  for (const auto& [st, v] : states) by_state.push_back({{{"state", st}}, v});
  w.family("dpu_agent_attachments_by_dataplane_state", "gauge",
           "Attachments by whether the dataplane forwards for them (Attachment.dataplane_state).", by_state);
  w.histogram("dpu_agent_datapath_programming_duration_seconds",
              "From a model change to the dataplane's acknowledgement of it.", programming.snapshot());
  if (ipsec != nullptr) ipsec->writeMetrics(w);
  return w.text();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config_path = argv[++i];
    else if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
    else if (a == "--check-config") check_only = true;
    else if (a == "--decode" && i + 1 < argc) return decodeMain(argv[i + 1]);
    else if (a == "--version") {
      std::cout << "dpu-agent " << kVersion << "\n";
      return 0;
    } else if (a == "--help" || a == "-h") return usage(argv[0], 0);
    else {
      std::cerr << "dpu-agent: unknown argument '" << a << "'\n";
      return usage(argv[0], 2);
    }
  }
  if (config_path.empty()) return usage(argv[0], 2);

  auto loaded = loadAgentConfig(config_path);
  if (!loaded) {
    std::cerr << "dpu-agent: bad configuration: " << loaded.error() << "\n";
    return 2;
  }
  AgentConfig config = std::move(*loaded);
  if (check_only) {
    std::string node = config.node_name_from.label.empty()
                           ? config.node_name
                           : "from label " + config.node_name_from.label + " of Node " + config.node_name_from.node;
    if (auto r = checkIpsecFiles(config); !r) {
      std::cerr << "dpu-agent: bad configuration: " << config_path << ": " << r.error() << "\n";
      return 2;
    }
    std::cout << "configuration OK: node " << node << ", pod MTU " << config.pod_mtu
              << (config.ipsec.enabled() ? std::string(", IPsec ") + ipsecModeName(config.ipsec.mode) : "") << "\n";
    return 0;
  }
  dpu::log::setLevel(*dpu::log::parseLevel(config.log_level));
  if (!config.log_file.empty()) {
    if (auto r = dpu::log::setFile(config.log_file); !r) {
      std::cerr << "dpu-agent: config.log.file: " << r.error() << "\n";
      return 2;
    }
  }
  // Signals are taken by sigwait below; every thread started after this inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  // SIGUSR1 starts an IPsec rotation; taken by the same sigwait.
  sigset_t waited = stop_signals;
  sigaddset(&waited, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &waited, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (!config.node_name_from.label.empty()) {
    auto name = resolveNodeName(config, stop_signals);
    if (!name) {
      DPU_LOG(kError, kLog) << name.error();
      return name.code() == dpu::ErrorCode::kClosed ? 0 : 2;
    }
    config.node_name = *name;
  }
  auto source = makeSource(config);
  if (!source) {
    DPU_LOG(kError, kLog) << source.error();
    return 2;
  }
  if (auto r = dpu::makeDirectories(config.state_dir, 0700); !r) {
    DPU_LOG(kError, kLog) << "config.stateDir: " << r.error();
    return 1;
  }

  ModelState model;
  Histogram programming(Histogram::latencyBounds());
  Agent agent(config, model, config.cluster_source.kind == ClusterSourceKind::kKubernetes);
  if (auto r = agent.restore(); !r) {
    DPU_LOG(kError, kLog) << "cannot start: " << r.error();
    return 1;
  }
  std::unique_ptr<IpsecController> ipsec;
  if (config.ipsec.enabled()) {
    ipsec = std::make_unique<IpsecController>(config, model);
    if (auto r = ipsec->start(); !r) {
      DPU_LOG(kError, kLog) << "cannot start: " << r.error();
      return 1;
    }
  }

  DataplaneClient client(config.dataplane_socket, "dpu-agent/" + config.node_name, model, programming);
  client.onGeneration([&agent](uint64_t g) { agent.setDataplaneGeneration(g); });
  client.onPortCapacity([&agent](uint32_t capacity, uint32_t max) { agent.setPortCapacity(capacity, max); });
  agent.setDataplaneView([&client](const std::string& port) { return client.portState(port); });
  if (ipsec) {
    client.onHello([&ipsec](const dpv1::HelloReply& h) { ipsec->dataplaneHello(h); });
    client.onReply([&ipsec](const dpv1::ProgramReply& r) { ipsec->dataplaneReply(r); });
    client.onStatusPoll([&ipsec](dpv1::StatusRequest& s) { ipsec->statusPoll(s); });
  }

  ClusterSource& src = **source;
  std::optional<ClusterTee> tee;
  if (ipsec) tee.emplace(agent, *ipsec);
  if (auto r = tee ? src.start(*tee) : src.start(agent); !r) {
    DPU_LOG(kError, kLog) << "cluster source: " << r.error();
    return 1;
  }
  // This node's entry, with its port keys and IPsec key: published now and
  // again whenever an attach or detach changes the keys or the IPsec key
  // changes (retried while the source refuses).
  uint64_t published_keys = 0, published_ipsec = 0;
  bool published = false, warned = false;
  auto last_publish = std::chrono::steady_clock::now();
  auto publish = [&] {
    const uint64_t version = agent.portKeysVersion();
    SelfEntry self{config.node_name, config.tunnel_ip.str(), "", agent.portKeys()};
    if (config.ipsec.nat_address) self.ipsec_nat_address = config.ipsec.nat_address->str();
    std::optional<dpu::ipsec::Advertisement> adv;
    if (ipsec) adv = ipsec->advertisement();
    if (adv) {
      self.ipsec_public_key = adv->public_key;
      self.ipsec_epoch = adv->epoch;
      self.ipsec_mode = adv->mode;
    }
    last_publish = std::chrono::steady_clock::now();
    if (auto r = src.publishSelf(self); !r) {
      // Said when it starts failing, not on every retry.
      if (published || !warned) {
        DPU_LOG(kWarn, kLog) << "cannot publish this node yet: " << r.error();
      }
      warned = true;
      published = false;
      return;
    }
    published = true;
    published_keys = version;
    published_ipsec = adv ? IpsecController::versionOf(*adv) : 0;
    // The rotation's clock starts when the others can see the key (and a
    // node leaving mode on counts its grace period from "keys" published).
    if (adv) ipsec->published(adv->epoch, adv->mode);
  };
  publish();
  auto ipsecVersion = [&]() -> uint64_t { return ipsec ? ipsec->advertisementVersion() : 0; };
  auto publishIfChanged = [&] {
    if (published && agent.portKeysVersion() == published_keys && ipsecVersion() == published_ipsec) return;
    if (!published && std::chrono::steady_clock::now() - last_publish < std::chrono::seconds(2)) return;
    publish();
  };

  ApiRouter::Hooks hooks;
  hooks.version = kVersion;
  hooks.not_ready_reason = [&]() -> std::string {
    if (auto why = agent.notReadyReason(); !why.empty()) return why;
    auto d = client.status();
    if (!d.connected) return "not connected to the dataplane at " + config.dataplane_socket + (d.last_error.empty() ? "" : ": " + d.last_error);
    if (!d.programmed) return "the dataplane is not programmed" + (d.last_error.empty() ? std::string() : ": " + d.last_error);
    return "";
  };
  hooks.metrics_text = [&]() { return metricsText(agent, src, client, programming, model, ipsec.get()); };
  ApiRouter router(agent, hooks);
  // The host's client certificate must name the node it runs on; the metrics
  // scraper is not a host and needs only the client CA's signature.
  ApiServer server(router, config.apiUri(), config.tls, ApiServer::Scope::kAll, config.node_name);
  if (config.api_insecure && config.tls.client_ca_file.empty()) {
    DPU_LOG(kWarn, kLog) << "api.insecure: the attach API on " << config.apiUri()
                         << " takes requests from any client that reaches it, without a client certificate";
  }
  if (auto r = server.start(); !r) {
    DPU_LOG(kError, kLog) << r.error();
    src.stop();
    client.stop();
    return 1;
  }
  std::optional<ApiServer> metrics_server;
  if (config.metrics.enabled) {
    metrics_server.emplace(router, config.metricsUri(), config.tls, ApiServer::Scope::kMetricsOnly);
    if (auto r = metrics_server->start(); !r) {
      DPU_LOG(kError, kLog) << r.error();
      server.stop();
      src.stop();
      client.stop();
      return 1;
    }
  }
  DPU_LOG(kInfo, kLog) << "dpu-agent " << kVersion << " running: node " << config.node_name << ", boot id " << agent.bootId()
                       << ", cluster source " << src.kind() << ", pod MTU " << config.pod_mtu;

  // The dataplane is programmed only once the cluster view is complete: a
  // FullSync sent earlier (say, after a restart, before the cluster file or
  // the API server answered) would lack the remote nodes and cut the traffic
  // that the dataplane is still forwarding with its last model. Until then the
  // dataplane keeps what it has and readyz says why the agent is not ready.
  int sig = 0;
  const timespec poll{0, 20 * 1000 * 1000};
  bool stopping = false;
  auto last_ipsec_tick = std::chrono::steady_clock::now();
  // Every wake-up: IPsec timers (a few times a second), SIGUSR1, the publication.
  auto housekeeping = [&](int s) {
    if (ipsec && s == SIGUSR1) {
      DPU_LOG(kInfo, kLog) << "SIGUSR1: starting an IPsec key rotation";
      ipsec->requestRotation("operator (SIGUSR1)");
    } else if (s == SIGUSR1) {
      DPU_LOG(kWarn, kLog) << "SIGUSR1 asks for an IPsec key rotation, but IPsec is off (config.ipsec)";
    }
    if (ipsec && std::chrono::steady_clock::now() - last_ipsec_tick >= std::chrono::milliseconds(250)) {
      ipsec->tick();
      last_ipsec_tick = std::chrono::steady_clock::now();
    }
    publishIfChanged();
  };
  while (!agent.clusterSynced()) {
    int s = sigtimedwait(&waited, nullptr, &poll);
    if (s > 0 && s != SIGUSR1) {
      sig = s;
      stopping = true;
      break;
    }
    housekeeping(s);
  }
  if (!stopping) {
    client.start(agent.dataplaneGeneration());
    const timespec tick{0, 100 * 1000 * 1000};
    for (;;) {
      sig = sigtimedwait(&waited, nullptr, &tick);
      if (sig > 0 && sig != SIGUSR1) break;
      housekeeping(sig);
    }
  }
  DPU_LOG(kInfo, kLog) << "stopping on signal " << sig;
  if (metrics_server) metrics_server->stop();
  server.stop();
  src.stop();
  client.stop();
  return 0;
}
