// dpu-agent: the DPU control plane daemon. Reads its config, restores its
// checkpoint, learns the cluster from a ClusterSource, serves the attach API to
// host-shim and programs dpu-dataplane with the logical model. Runs until
// SIGTERM/SIGINT.
//
//   dpu-agent --config /etc/dpu-agent/config.yaml [--check-config]
#include <signal.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "common/atomic_file.h"
#include "common/log.h"
#include "control/agent.h"
#include "control/agent_config.h"
#include "control/api_router.h"
#include "control/api_server.h"
#include "control/dataplane_client.h"
#include "control/file_source.h"
#include "control/metrics.h"
#if DPU_HAVE_KUBE_SOURCE
#include "control/kube_source.h"
#endif

namespace {

using namespace dpu::control;

constexpr const char* kVersion = "0.1.0";
constexpr const char* kLog = "dpu-agent";

int usage(const char* argv0, int code) {
  (code ? std::cerr : std::cout) << "usage: " << argv0 << " --config FILE [--check-config]\n"
                                 << "  --config FILE    the agent configuration (JSON or YAML)\n"
                                 << "  --check-config   validate the configuration and exit\n";
  return code;
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

std::string metricsText(const Agent& agent, const ClusterSource& source, const DataplaneClient& client,
                        const Histogram& programming, const ModelState& model) {
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
  auto s = source.stats();
  Labels src{{"source", source.kind()}};
  w.counter("dpu_agent_cluster_watch_restarts_total", "Cluster watch streams resumed or relisted.",
            static_cast<double>(s.watch_restarts), src);
  w.counter("dpu_agent_cluster_relists_total", "Cluster relists (410 Gone) or file reloads.", static_cast<double>(s.relists),
            src);
  w.counter("dpu_agent_cluster_malformed_objects_total", "Cluster objects (or files) skipped as malformed.",
            static_cast<double>(s.malformed), src);
  w.counter("dpu_agent_cluster_events_total", "Cluster changes delivered.", static_cast<double>(s.events), src);
  w.gauge("dpu_agent_cluster_synced", "1 when the cluster source completed its first sync.", s.synced ? 1 : 0, src);
  w.counter("dpu_agent_released_orphan_attachments_total", "Attachments released because their pod is gone.",
            static_cast<double>(agent.releasedOrphans()));
  auto d = client.status();
  w.gauge("dpu_agent_dataplane_connected", "1 while connected to dpu-dataplane.", d.connected ? 1 : 0);
  w.gauge("dpu_agent_dataplane_generation", "Model generation the dataplane acknowledged.", static_cast<double>(d.generation));
  w.counter("dpu_agent_dataplane_full_syncs_total", "Full syncs sent and acknowledged.", static_cast<double>(d.full_syncs));
  w.counter("dpu_agent_dataplane_deltas_total", "Deltas sent and acknowledged.", static_cast<double>(d.deltas));
  w.counter("dpu_agent_dataplane_resyncs_requested_total", "RESYNC_NEEDED answers.", static_cast<double>(d.resyncs_requested));
  w.counter("dpu_agent_dataplane_reconnects_total", "Reconnects to the dataplane.", static_cast<double>(d.reconnects));
  w.counter("dpu_agent_dataplane_refused_total", "Programming requests the dataplane refused as invalid.",
            static_cast<double>(d.refused));
  w.histogram("dpu_agent_datapath_programming_duration_seconds",
              "From a model change to the dataplane's acknowledgement of it.", programming.snapshot());
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
    std::cout << "configuration OK: node " << config.node_name << ", pod MTU " << config.pod_mtu << "\n";
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
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
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

  DataplaneClient client(config.dataplane_socket, "dpu-agent/" + config.node_name, model, programming);
  client.onGeneration([&agent](uint64_t g) { agent.setDataplaneGeneration(g); });

  ClusterSource& src = **source;
  if (auto r = src.start(agent); !r) {
    DPU_LOG(kError, kLog) << "cluster source: " << r.error();
    return 1;
  }
  SelfEntry self{config.node_name, config.tunnel_ip.str(), ""};
  if (auto r = src.publishSelf(self); !r) {
    DPU_LOG(kWarn, kLog) << "cannot publish this node yet: " << r.error();
  }

  ApiRouter::Hooks hooks;
  hooks.version = kVersion;
  hooks.not_ready_reason = [&]() -> std::string {
    if (auto why = agent.notReadyReason(); !why.empty()) return why;
    auto d = client.status();
    if (!d.connected) return "not connected to the dataplane at " + config.dataplane_socket + (d.last_error.empty() ? "" : ": " + d.last_error);
    if (!d.programmed) return "the dataplane is not programmed" + (d.last_error.empty() ? std::string() : ": " + d.last_error);
    return "";
  };
  hooks.metrics_text = [&]() { return metricsText(agent, src, client, programming, model); };
  ApiRouter router(agent, hooks);
  ApiServer server(router, config.apiUri(), config.tls);
  if (auto r = server.start(); !r) {
    DPU_LOG(kError, kLog) << r.error();
    src.stop();
    client.stop();
    return 1;
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
  while (!agent.clusterSynced()) {
    if (int s = sigtimedwait(&stop_signals, nullptr, &poll); s > 0) {
      sig = s;
      stopping = true;
      break;
    }
  }
  if (!stopping) {
    client.start(agent.dataplaneGeneration());
    sigwait(&stop_signals, &sig);
  }
  DPU_LOG(kInfo, kLog) << "stopping on signal " << sig;
  server.stop();
  src.stop();
  client.stop();
  return 0;
}
