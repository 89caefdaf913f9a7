// NetworkPolicy into a real dpu-dataplane (bench/control.sh, part "policy",
// starts the process): the cluster of control_policy_cluster.h (10,000 pods,
// 1,000 namespaces, 5,000 policies) through the agent's own code — Agent
// (PolicyCompiler, PortPolicy), ModelState, DataplaneClient — with this node's
// pods attached (one representor port each), then one change at a time,
// alternating a policy change (p0 of a namespace holding local pods gains or
// loses a rule) and a local pod's label change.
//
// Measures: the time to hand the cluster to the Agent (compile_s: every
// namespace, pod and policy event, the compiler's work included), this
// process's resident memory then (agent_rss_mb: what the agent holds for it),
// the full sync acknowledged, the dataplane's resident memory, and the p50/p99
// latency from one change handed to the Agent (as the cluster source calls
// it) to the dataplane's acknowledgement of the Delta that carries it (the
// new PortPolicies installed, the ports' flows revalidated). A change that
// alters no local pod's rules sends nothing and is not counted. Also the
// Delta's part alone, from the change entering the model to the
// acknowledgement (the client's programming histogram: a bucket's upper
// bound, over both kinds of change).
//
//   control_policy_program_bench --socket PROGRAMMING_SOCKET [--pods 10000] [--namespaces 1000]
//                                [--local 16] [--changes 500] [--dataplane-pid PID]
// Prints "KEY value" lines.
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
#include "control_policy_cluster.h"

namespace {

using dpu::bench::procStatusKb;
using namespace dpu::control;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string socket, dataplane_pid;
  dpu::bench::PolicyCluster cluster;
  uint32_t local = 16;
  int changes = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--socket") socket = v;
    else if (a == "--pods") cluster.pods = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--namespaces") cluster.namespaces = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--local") local = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--changes") changes = std::stoi(v);
    else if (a == "--dataplane-pid") dataplane_pid = v;
    else {
      fprintf(stderr, "control_policy_program_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (socket.empty() || local == 0 || cluster.namespaces == 0 || cluster.pods < cluster.namespaces ||
      cluster.pods % local != 0) {
    fprintf(stderr, "control_policy_program_bench: --socket PATH is required (a dpu-dataplane's programming socket); "
                    "--local >= 1 dividing --pods; --pods >= --namespaces >= 1\n");
    return 2;
  }
  // node-0 holds `local` pods: those J with J % nodes == 0.
  cluster.nodes = cluster.pods / local;
  dpu::log::setLevel(dpu::log::Level::kWarn);

  std::string tmpl = (std::filesystem::temp_directory_path() / "dpu-pol-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    perror("control_policy_program_bench: mkdtemp");
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
      {"representors", {{{"pf", 0}, {"vfCount", local}, {"name", "pf0vf{vf}"}}}},
      {"podCIDR", "10.244.0.0/24"},
      {"clusterCIDRs", {"10.244.0.0/16", "10.128.0.0/16"}},
      {"serviceCIDRs", {"10.96.0.0/12"}},
      {"clusterSource", {{"type", "file"}, {"path", state_dir + "/cluster.yaml"}}},
      {"dataplaneSocket", socket},
      {"stateDir", state_dir},
  });
  if (!config) {
    fprintf(stderr, "control_policy_program_bench: %s\n", config.error().c_str());
    return 1;
  }
  ModelState model;
  Agent agent(*config, model, false);
  if (auto r = agent.restore(); !r) {
    fprintf(stderr, "control_policy_program_bench: %s\n", r.error().c_str());
    return 1;
  }

  // The cluster source's initial lists, then its sync; then this node's pods attach.
  const auto t0 = Clock::now();
  for (uint32_t i = 0; i < cluster.namespaces; ++i) agent.namespaceUpserted(cluster.namespaceOf(i));
  for (uint32_t j = 0; j < cluster.pods; ++j) agent.podUpserted(cluster.podOf(j));
  for (uint32_t i = 0; i < cluster.namespaces; ++i)
    for (uint32_t w = 0; w < dpu::bench::PolicyCluster::kPoliciesPerNamespace; ++w)
      agent.networkPolicyUpserted(cluster.policyOf(i, w));
  agent.synced();
  const auto compiled = Clock::now();
  for (uint32_t k = 0; k < local; ++k) {
    const auto pod = cluster.podOf(k * cluster.nodes);
    dpu::attach::v1::AttachRequest r;
    r.set_kind(dpu::attach::v1::POD);
    r.mutable_pod()->set_namespace_(pod.ns);
    r.mutable_pod()->set_name(pod.name);
    r.set_sandbox_id("sandbox-" + pod.ns + "-" + pod.name);
    r.set_ifname("eth0");
    r.set_pf_index(0);
    r.set_vf_index(k);
    if (auto a = agent.attach(r); !a) {
      fprintf(stderr, "control_policy_program_bench: attach %s/%s: %s\n", pod.ns.c_str(), pod.name.c_str(),
              a.error().c_str());
      return 1;
    }
  }
  const auto attached = Clock::now();
  if (!agent.refusedPolicies().empty()) {
    fprintf(stderr, "control_policy_program_bench: %zu policies refused: %s\n", agent.refusedPolicies().size(),
            agent.refusedPolicies().begin()->second.c_str());
    return 1;
  }
  const long agent_rss = procStatusKb("self", "VmRSS:");
  const long rss_before = dataplane_pid.empty() ? -1 : procStatusKb(dataplane_pid, "VmRSS:");

  Histogram programming(Histogram::latencyBounds());
  DataplaneClient client(socket, "control_policy_program_bench", model, programming);
  dpu::bench::DataplaneAcks acks(client);

  const auto started = Clock::now();
  client.start();
  Clock::time_point synced_at;
  if (!acks.waitAbove(0, std::chrono::seconds(60), synced_at)) {
    fprintf(stderr, "control_policy_program_bench: no full sync acknowledged within 60 s (%s)\n",
            client.status().last_error.c_str());
    client.stop();
    return 1;
  }
  auto st = client.status();
  printf("namespaces %u\npods %u\npolicies %u\nlocal_pods %u\nport_policies %zu\n", cluster.namespaces, cluster.pods,
         cluster.namespaces * dpu::bench::PolicyCluster::kPoliciesPerNamespace, local, model.portPolicyCount());
  printf("compile_s %.3f\nattach_s %.3f\nfull_sync_s %.3f\n", ms(compiled - t0) / 1000, ms(attached - compiled) / 1000,
         ms(synced_at - started) / 1000);
  printf("agent_rss_mb %.1f\nproblems %zu\n", agent_rss / 1024.0, st.problems.size());
  if (!dataplane_pid.empty()) {
    printf("dp_rss_before_mb %.1f\ndp_rss_mb %.1f\n", rss_before / 1024.0,
           procStatusKb(dataplane_pid, "VmRSS:") / 1024.0);
  }
  fflush(stdout);

  std::vector<double> policy_lat, label_lat;
  // The client's programming histogram (from a change entering the model to
  // the dataplane's acknowledgement: the client, the socket, the dataplane's
  // install and reply), without the full sync already in it.
  const Histogram::Snapshot programmed_before = programming.snapshot();
  std::vector<bool> flipped(cluster.pods, false);
  std::vector<uint16_t> variant(cluster.namespaces, 0);
  uint64_t gen = st.generation;
  int silent = 0;
  for (int c = 0; c < changes; ++c) {
    const uint32_t local_j = static_cast<uint32_t>(c / 2) % local * cluster.nodes;
    const uint32_t i = local_j % cluster.namespaces;
    const auto start = Clock::now();
    if (c % 2 == 0) {
      ++variant[i];  // p0 gains or loses its rule
      agent.networkPolicyUpserted(cluster.policyOf(i, 0, variant[i]));
    } else {
      flipped[local_j] = !flipped[local_j];
      agent.podUpserted(cluster.podOf(local_j, flipped[local_j]));
    }
    Clock::time_point at;
    // A change that alters no local pod's rules sends no Delta.
    if (!acks.waitAbove(gen, std::chrono::milliseconds(500), at)) {
      ++silent;
      continue;
    }
    (c % 2 == 0 ? policy_lat : label_lat).push_back(ms(at - start));
    gen = acks.last();
  }
  st = client.status();
  client.stop();
  auto report = [](const char* prefix, std::vector<double>& v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
    printf("%s_changes %zu\n%s_p50_ms %.3f\n%s_p99_ms %.3f\n%s_max_ms %.3f\n", prefix, v.size(), prefix, pct(0.5),
           prefix, pct(0.99), prefix, v.back());
  };
  report("policy", policy_lat);
  report("label", label_lat);
  {
    Histogram::Snapshot d = programming.snapshot();
    for (size_t i = 0; i < d.cumulative.size(); ++i) d.cumulative[i] -= programmed_before.cumulative[i];
    d.count -= programmed_before.count;
    if (d.count > 0) {
      printf("delta_p50_le_ms %.3f\ndelta_p99_le_ms %.3f\n", d.quantileUpperBound(0.5) * 1000,
             d.quantileUpperBound(0.99) * 1000);
    }
  }
  std::vector<double> all = policy_lat;
  all.insert(all.end(), label_lat.begin(), label_lat.end());
  report("change", all);
  printf("silent_changes %d\ndeltas %llu\nfull_syncs %llu\nrefused %llu\n", silent,
         static_cast<unsigned long long>(st.deltas), static_cast<unsigned long long>(st.full_syncs),
         static_cast<unsigned long long>(st.refused));
  if (!dataplane_pid.empty()) printf("dp_rss_after_changes_mb %.1f\n", procStatusKb(dataplane_pid, "VmRSS:") / 1024.0);
  return st.refused == 0 && st.full_syncs == 1 ? 0 : 1;
}
