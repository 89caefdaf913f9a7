// NetworkPolicy compiler at scale (issue 18, "Control plane"): the cluster of
// control_policy_cluster.h (by default 10,000 pods, 1,000 namespaces, 5,000
// policies) given to one node's PolicyCompiler as the agent gives it at start
// (namespaces, pods, policies), then changes one at a time, alternating a
// policy change (p0 of a namespace holding local pods gains or loses a rule)
// and a local pod's label change (its app label moves), each answered with
// the local pods whose rules changed.
//
// Measures: the time to compile everything (compile_s), this process's
// resident memory once compiled (rss_mb: the objects as held plus the
// compiled rules, what the agent holds for them), the local pods and their
// rules, and the p50/p99 latency of one change (the compiler's answer, which
// the agent turns into PortPolicy upserts: control.sh's dataplane part adds the
// Delta to the dataplane).
//
//   control_policy_bench [--pods 10000] [--namespaces 1000] [--nodes 100] [--changes 500]
// Prints "KEY value" lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "control_policy_cluster.h"
#include "policy/compiler.h"
#include "proc_status.h"

namespace {

using dpu::bench::procStatusKb;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  dpu::bench::PolicyCluster cluster;
  int changes = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--pods") cluster.pods = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--namespaces") cluster.namespaces = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--nodes") cluster.nodes = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--changes") changes = std::stoi(v);
    else {
      fprintf(stderr, "control_policy_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (cluster.namespaces == 0 || cluster.nodes == 0 || cluster.pods < cluster.namespaces) {
    fprintf(stderr, "control_policy_bench: --namespaces and --nodes >= 1, --pods >= --namespaces\n");
    return 2;
  }
  const long rss_start = procStatusKb("self", "VmRSS:");
  dpu::policy::PolicyCompiler compiler("node-0");
  const auto t0 = Clock::now();
  size_t refused = 0;
  for (uint32_t i = 0; i < cluster.namespaces; ++i) (void)compiler.upsertNamespace(cluster.namespaceOf(i));
  for (uint32_t j = 0; j < cluster.pods; ++j) (void)compiler.upsertPod(cluster.podOf(j));
  for (uint32_t i = 0; i < cluster.namespaces; ++i)
    for (uint32_t w = 0; w < dpu::bench::PolicyCluster::kPoliciesPerNamespace; ++w)
      refused += compiler.upsertPolicy(cluster.policyOf(i, w)).refused.size();
  const auto t1 = Clock::now();
  size_t rules = 0, prefixes = 0;
  for (const auto& [k, r] : compiler.rules()) {
    for (const auto* d : {&r.ingress, &r.egress}) {
      rules += d->rules.size();
      for (const auto& x : d->rules) prefixes += x.peers.size();
    }
  }
  printf("namespaces %u\npods %u\npolicies %u\nrefused %zu\n", cluster.namespaces, cluster.pods,
         cluster.namespaces * dpu::bench::PolicyCluster::kPoliciesPerNamespace, refused);
  printf("local_pods %zu\nrules %zu\nprefixes %zu\n", compiler.rules().size(), rules, prefixes);
  printf("compile_s %.3f\nrss_mb %.1f\nrss_start_mb %.1f\n", ms(t1 - t0) / 1000,
         procStatusKb("self", "VmRSS:") / 1024.0,
         rss_start / 1024.0);

  std::vector<double> policy_lat, label_lat;
  size_t touched = 0;
  std::vector<bool> flipped(cluster.pods, false);
  std::vector<uint16_t> variant(cluster.namespaces, 0);
  for (int c = 0; c < changes; ++c) {
    // A namespace that holds local pods (node-0 holds pods J with J % nodes
    // == 0): a change there has work to do on this node.
    const uint32_t local_j = (static_cast<uint32_t>(c) * 104729u % (cluster.pods / cluster.nodes)) * cluster.nodes;
    const uint32_t i = local_j % cluster.namespaces;
    auto start = Clock::now();
    dpu::policy::Changes out;
    if (c % 2 == 0) {
      ++variant[i];  // p0 gains or loses its rule
      out = compiler.upsertPolicy(cluster.policyOf(i, 0, variant[i]));
      policy_lat.push_back(ms(Clock::now() - start));
    } else {
      // A local pod's label.
      flipped[local_j] = !flipped[local_j];
      out = compiler.upsertPod(cluster.podOf(local_j, flipped[local_j]));
      label_lat.push_back(ms(Clock::now() - start));
    }
    touched += out.pods.size();
  }
  auto report = [](const char* prefix, std::vector<double>& v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
    printf("%s_p50_ms %.3f\n%s_p99_ms %.3f\n%s_max_ms %.3f\n", prefix, pct(0.5), prefix, pct(0.99), prefix, v.back());
  };
  report("policy_change", policy_lat);
  report("label_change", label_lat);
  printf("changes %d\ntouched_pods %zu\n", changes, touched);
  return refused == 0 ? 0 : 1;
}
