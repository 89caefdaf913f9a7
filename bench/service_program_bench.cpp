// Services into a real dpu-dataplane (bench/control.sh starts the process):
// the agent's own code from the cluster listener down — Agent (ServiceCatalog,
// compileService), ModelState and DataplaneClient — programming N services of
// M endpoints each over the programming socket.
//
// Measures: the time to compile the services (the cluster source's initial
// list handed to the Agent, then synced()), the time from the client's start
// to the dataplane's acknowledgement of the full sync that carries them, and
// then, one change at a time, the latency from one EndpointSlice change handed
// to the Agent (endpointSliceUpserted, as the cluster source calls it) to the
// dataplane's acknowledgement of the Delta that carries it. The dataplane
// acknowledges after the model is installed: the new snapshot published and
// the flows of the changed service invalidated (engine.cpp installServiceDelta()). With
// --dataplane-pid, the dataplane's resident memory before and after the
// programming.
//
//   service_program_bench --socket PROGRAMMING_SOCKET [--services 10000] [--endpoints 10]
//                         [--changes 500] [--dataplane-pid PID]
// Prints "KEY value" lines (compile_s, full_sync_s, initial_s, p50_ms, p99_ms, ...).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "control/agent.h"
#include "control/agent_config.h"
#include "control/dataplane_client.h"
#include "dataplane_acks.h"
#include "proc_status.h"

namespace {

using dpu::bench::procStatusKb;
using namespace dpu::control;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kNamespaces = 100;
constexpr uint32_t kNodes = 100;  // endpoints spread over them; node-000 is this one

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string ip4(uint32_t v) {
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." + std::to_string((v >> 8) & 255) +
         "." + std::to_string(v & 255);
}

ServiceInfo serviceOf(uint32_t i) {
  ServiceInfo s;
  s.ns = "ns-" + std::to_string(i % kNamespaces);
  s.name = "svc-" + std::to_string(i);
  s.cluster_ips = {ip4((10u << 24 | 96u << 16) + 1 + i)};  // in 10.96.0.0/12
  // A named targetPort, resolved per endpoint from the slice's ports (the general case).
  s.ports = {{"http", Protocol::kTcp, 80, PortRef{0, "http"}, 0}};
  return s;
}

// Endpoint e of service i: a pod on node (i + e) mod kNodes, in that node's
// /24 of 10.244.0.0/16. Change `version` (> 0) replaces endpoint 0 by a pod
// of its own address (10.245.0.0 + version: never one the service had) that
// is ready on even versions only, so every change alters the compilation.
EndpointSliceInfo sliceOf(uint32_t i, uint32_t endpoints, uint32_t version = 0) {
  EndpointSliceInfo s;
  s.ns = "ns-" + std::to_string(i % kNamespaces);
  s.name = "svc-" + std::to_string(i) + "-x7k2p";
  s.service_name = "svc-" + std::to_string(i);
  for (uint32_t e = 0; e < endpoints; ++e) {
    EndpointInfo ep;
    const uint32_t node = (i + e) % kNodes;
    const uint32_t host = (i * endpoints + e) % 250 + 2;
    ep.addresses = {e == 0 && version > 0 ? ip4((10u << 24 | 245u << 16) + version)
                                          : ip4((10u << 24 | 244u << 16) + (node << 8) + host)};
    ep.node_name = "node-" + std::to_string(node);
    ep.ready = !(e == 0 && version % 2 == 1);  // changes flip endpoint 0's readiness too
    ep.serving = true;
    s.endpoints.push_back(std::move(ep));
  }
  s.ports = {{"http", Protocol::kTcp, 8080}};
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, dataplane_pid;
  uint32_t services = 10000, endpoints = 10;
  int changes = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--socket") socket = v;
    else if (a == "--services") services = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--endpoints") endpoints = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--changes") changes = std::stoi(v);
    else if (a == "--dataplane-pid") dataplane_pid = v;
    else {
      fprintf(stderr, "service_program_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (socket.empty() || services == 0 || endpoints == 0 || endpoints > 250) {
    fprintf(stderr, "service_program_bench: --socket PATH is required (a dpu-dataplane's programming socket); "
                    "--services >= 1, --endpoints 1..250\n");
    return 2;
  }
  dpu::log::setLevel(dpu::log::Level::kWarn);

  std::string tmpl = (std::filesystem::temp_directory_path() / "dpu-svc-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    perror("service_program_bench: mkdtemp");
    return 1;
  }
  const std::string state_dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{state_dir};

  auto config = parseAgentConfig(nlohmann::json{
      {"nodeName", "node-0"},
      {"tunnelIP", "192.168.100.1"},
      {"representors", {{{"pf", 0}, {"vfCount", 8}, {"name", "pf0vf{vf}"}}}},
      {"podCIDR", "10.244.0.0/24"},
      {"clusterCIDRs", {"10.244.0.0/16"}},
      {"serviceCIDRs", {"10.96.0.0/12"}},
      {"clusterSource", {{"type", "file"}, {"path", state_dir + "/cluster.yaml"}}},
      {"dataplaneSocket", socket},
      {"stateDir", state_dir},
  });
  if (!config) {
    fprintf(stderr, "service_program_bench: %s\n", config.error().c_str());
    return 1;
  }
  ModelState model;
  Agent agent(*config, model, false);
  if (auto r = agent.restore(); !r) {
    fprintf(stderr, "service_program_bench: %s\n", r.error().c_str());
    return 1;
  }

  // The cluster source's initial list, then its sync.
  auto t0 = Clock::now();
  for (uint32_t i = 0; i < services; ++i) {
    agent.serviceUpserted(serviceOf(i));
    agent.endpointSliceUpserted(sliceOf(i, endpoints));
  }
  agent.synced();
  auto compiled = Clock::now();
  if (model.serviceCount() != services || !agent.refusedServices().empty()) {
    fprintf(stderr, "service_program_bench: %zu of %u services compiled (%zu refused%s%s)\n", model.serviceCount(),
            services, agent.refusedServices().size(), agent.refusedServices().empty() ? "" : ": ",
            agent.refusedServices().empty() ? "" : agent.refusedServices().begin()->second.c_str());
    return 1;
  }
  const long rss_before = dataplane_pid.empty() ? -1 : procStatusKb(dataplane_pid, "VmRSS:");

  Histogram programming(Histogram::latencyBounds());
  DataplaneClient client(socket, "service_program_bench", model, programming);
  dpu::bench::DataplaneAcks acks(client);

  auto started = Clock::now();
  client.start();
  Clock::time_point synced_at;
  if (!acks.waitAbove(0, std::chrono::seconds(60), synced_at)) {
    fprintf(stderr, "service_program_bench: no full sync acknowledged within 60 s (%s)\n",
            client.status().last_error.c_str());
    client.stop();
    return 1;
  }
  auto st = client.status();
  printf("services %zu\nendpoints %llu\n", model.serviceCount(),
         static_cast<unsigned long long>(services) * endpoints);
  printf("compile_s %.3f\nfull_sync_s %.3f\ninitial_s %.3f\n", ms(compiled - t0) / 1000, ms(synced_at - started) / 1000,
         ms(synced_at - t0) / 1000);
  printf("problems %zu\n", st.problems.size());
  if (!dataplane_pid.empty()) {
    printf("dp_rss_before_mb %.1f\ndp_rss_mb %.1f\n", rss_before / 1024.0,
           procStatusKb(dataplane_pid, "VmRSS:") / 1024.0);
  }
  fflush(stdout);

  // One EndpointSlice change at a time: endpoint 0 of one service moves (and
  // flips its readiness), so that service's compilation changes.
  std::vector<double> lat;
  uint64_t gen = st.generation;
  std::string last_service, last_backend;
  for (int i = 0; i < changes; ++i) {
    const uint32_t v = static_cast<uint32_t>(i) * 7919u % services;
    auto slice = sliceOf(v, endpoints, static_cast<uint32_t>(i) + 1);
    last_service = slice.ns + "/" + slice.service_name;
    last_backend = slice.endpoints.front().addresses.front();
    auto start = Clock::now();
    agent.endpointSliceUpserted(slice);
    Clock::time_point at;
    if (!acks.waitAbove(gen, std::chrono::seconds(5), at)) {
      fprintf(stderr, "service_program_bench: change %d was not acknowledged within 5 s (%s)\n", i,
              client.status().last_error.c_str());
      client.stop();
      return 1;
    }
    lat.push_back(ms(at - start));
    gen = acks.last();
  }
  st = client.status();
  client.stop();
  if (!lat.empty()) {
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double p) { return lat[std::min(lat.size() - 1, static_cast<size_t>(p * lat.size()))]; };
    printf("changes %zu\np50_ms %.3f\np99_ms %.3f\nmax_ms %.3f\n", lat.size(), pct(0.50), pct(0.99), lat.back());
  }
  // Every change was its own Delta, none refused, no resync.
  printf("deltas %llu\nfull_syncs %llu\nrefused %llu\n", static_cast<unsigned long long>(st.deltas),
         static_cast<unsigned long long>(st.full_syncs), static_cast<unsigned long long>(st.refused));
  // For the caller to check in `dpuctl services` that the dataplane balances to it.
  if (!last_service.empty()) printf("last_service %s\nlast_backend %s\n", last_service.c_str(), last_backend.c_str());
  if (!dataplane_pid.empty()) printf("dp_rss_after_changes_mb %.1f\n", procStatusKb(dataplane_pid, "VmRSS:") / 1024.0);
  return st.refused == 0 && st.full_syncs == 1 ? 0 : 1;
}
