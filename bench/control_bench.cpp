// Control-plane scale: the Kubernetes ClusterSource against the fake API
// server (a separate process, so this process's memory is the client's alone)
// holding 5,000 nodes, 150,000 pods, 10,000 services and 10,000 EndpointSlices
// with 100,000 endpoints, in 100 namespaces (all of them watched).
//
// Measures: the time from start() to synced() (every object listed, decoded
// and stored), the resident memory of this process holding the synced state
// (the source plus a listener that keeps every object in maps, as the agent's
// ClusterView does), and the latency from one EndpointSlice change at the fake
// server (its CLOCK_MONOTONIC time of the change) to the listener callback
// that stores it; e2e_* also counts sending the change to the fake.
//
//   control_bench --server http://127.0.0.1:PORT [--changes 500] [--page-size 5000]
//                 [--expect-pods N] [--namespaces 100] [--services 10000]
// Prints "KEY value" lines (sync_s, rss_mb, hwm_mb, p50_ms, p99_ms, e2e_p99_ms, ...).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <cpprest/http_client.h>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "control/kube_source.h"
#include "proc_status.h"

namespace {

using dpu::bench::procStatusKb;
using namespace dpu::control;
using Clock = std::chrono::steady_clock;

// The agent keeps what it hears in maps keyed by namespace/name.
class StoringListener : public ClusterListener {
 public:
  void nodeUpserted(const NodeInfo& n) override { nodes_[n.name] = n; }
  void nodeDeleted(const std::string& name) override { nodes_.erase(name); }
  void podUpserted(const PodInfo& p) override { pods_[p.ns + "/" + p.name] = p; }
  void podDeleted(const std::string& ns, const std::string& name) override { pods_.erase(ns + "/" + name); }
  void serviceUpserted(const ServiceInfo& s) override { services_[s.ns + "/" + s.name] = s; }
  void serviceDeleted(const std::string& ns, const std::string& name) override { services_.erase(ns + "/" + name); }
  void endpointSliceUpserted(const EndpointSliceInfo& s) override {
    slices_[s.ns + "/" + s.name] = s;
    if (s.name == watched_name_) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_at_ = Clock::now();
      seen_ = true;
      cv_.notify_all();
    }
  }
  void endpointSliceDeleted(const std::string& ns, const std::string& name) override {
    slices_.erase(ns + "/" + name);
  }
  void networkPolicyUpserted(const NetworkPolicyInfo& p) override { policies_[p.ns + "/" + p.name] = p; }
  void networkPolicyDeleted(const std::string& ns, const std::string& name) override {
    policies_.erase(ns + "/" + name);
  }
  void namespaceUpserted(const NamespaceInfo& n) override { namespaces_[n.name] = n; }
  void namespaceDeleted(const std::string& name) override { namespaces_.erase(name); }
  void synced() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!synced_) synced_at_ = Clock::now();
    synced_ = true;
    cv_.notify_all();
  }

  bool waitSynced(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return synced_; });
  }
  void expect(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_name_ = name;
    seen_ = false;
  }
  bool waitSeen(std::chrono::milliseconds limit, Clock::time_point& at) {
    std::unique_lock<std::mutex> lock(mu_);
    bool ok = cv_.wait_for(lock, limit, [&] { return seen_; });
    at = seen_at_;
    return ok;
  }
  size_t endpoints() const {
    size_t n = 0;
    for (const auto& [k, s] : slices_) n += s.endpoints.size();
    return n;
  }

  Clock::time_point synced_at_;
  std::unordered_map<std::string, NodeInfo> nodes_;
  std::unordered_map<std::string, PodInfo> pods_;
  std::unordered_map<std::string, ServiceInfo> services_;
  std::unordered_map<std::string, EndpointSliceInfo> slices_;
  std::unordered_map<std::string, NetworkPolicyInfo> policies_;
  std::unordered_map<std::string, NamespaceInfo> namespaces_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool synced_ = false;
  bool seen_ = false;
  std::string watched_name_;
  Clock::time_point seen_at_;
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string server;
  int changes = 500;
  uint32_t page = 5000, namespaces = 100, services = 10000;
  uint32_t max_pending = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--max-pending") max_pending = static_cast<uint32_t>(std::stoul(v));
    if (a == "--server") server = v;
    else if (a == "--changes") changes = std::stoi(v);
    else if (a == "--page-size") page = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--namespaces") namespaces = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--services") services = static_cast<uint32_t>(std::stoul(v));
  }
  if (server.empty()) {
    fprintf(stderr, "control_bench: --server URL of a fake_kube_apiserver is required\n");
    return 2;
  }
  dpu::log::setLevel(dpu::log::Level::kWarn);
  long rss_before = procStatusKb("self", "VmRSS:");

  KubeSourceConfig cfg;
  cfg.page_size = page;
  cfg.max_pending = max_pending;
  cfg.node_name = "node-00000";
  KubeConnection conn;
  conn.server = server;
  conn.origin = "bench";
  auto made = makeKubernetesSource(cfg, conn);
  if (!made.ok()) {
    fprintf(stderr, "control_bench: %s\n", made.error().c_str());
    return 1;
  }
  auto& source = *made.value();
  StoringListener listener;
  auto t0 = Clock::now();
  if (auto ok = source.start(listener); !ok) {
    fprintf(stderr, "control_bench: %s\n", ok.error().c_str());
    return 1;
  }
  if (!listener.waitSynced(std::chrono::seconds(120))) {
    fprintf(stderr, "control_bench: no sync within 120 s (%s)\n", source.stats().last_error.c_str());
    return 1;
  }
  double sync_s = ms(listener.synced_at_ - t0) / 1000.0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  long rss = procStatusKb("self", "VmRSS:");
  long hwm = procStatusKb("self", "VmHWM:");
  printf("nodes %zu\npods %zu\nservices %zu\nendpointslices %zu\nendpoints %zu\nnamespaces %zu\n",
         listener.nodes_.size(), listener.pods_.size(), listener.services_.size(), listener.slices_.size(),
         listener.endpoints(), listener.namespaces_.size());
  printf("sync_cpu_s %.3f\n", cpu_s);
  printf("sync_s %.3f\nrss_mb %.1f\nhwm_mb %.1f\nrss_baseline_mb %.1f\n", sync_s, rss / 1024.0, hwm / 1024.0,
         rss_before / 1024.0);
  fflush(stdout);

  // One EndpointSlice change at a time: flip one endpoint's readiness.
  web::http::client::http_client control{web::uri(server)};
  std::vector<double> lat;      // the fake applied the change -> the listener stored it
  std::vector<double> lat_e2e;  // this process sent the change -> the listener stored it
  // Every change must differ from what the fake already holds (an earlier run
  // may have made the same one, and an unchanged slice is not delivered).
  const uint32_t nonce = static_cast<uint32_t>(getpid()) ^
                         static_cast<uint32_t>(Clock::now().time_since_epoch().count());
  for (int i = 0; i < changes; ++i) {
    uint32_t j = nonce + static_cast<uint32_t>(i);
    uint32_t v = static_cast<uint32_t>(i * 7919) % services;
    char ns[32], name[64], svc[32];
    snprintf(ns, sizeof ns, "ns-%03u", v % namespaces);
    snprintf(name, sizeof name, "svc-%05u-x7k2p", v);
    snprintf(svc, sizeof svc, "svc-%05u", v);
    // Ten endpoints as before (the cluster keeps its 100,000); the first one changes.
    nlohmann::json endpoints = nlohmann::json::array();
    endpoints.push_back({{"addresses", {"10.201." + std::to_string((j / 250) % 250) + "." + std::to_string(j % 250 + 1)}},
                         {"conditions", {{"ready", i % 2 == 0}, {"serving", true}, {"terminating", false}}},
                         {"nodeName", "bench-" + std::to_string(nonce)}});
    for (int e = 1; e < 10; ++e)
      endpoints.push_back({{"addresses", {"10.202." + std::to_string(v % 250) + "." + std::to_string(e)}},
                           {"conditions", {{"ready", true}, {"serving", true}, {"terminating", false}}},
                           {"nodeName", "node-00001"}});
    nlohmann::json slice = {
        {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"kubernetes.io/service-name", svc}}}}},
        {"addressType", "IPv4"},
        {"endpoints", endpoints},
        {"ports", {{{"name", "http"}, {"protocol", "TCP"}, {"port", 8080}}}}};
    std::string body = slice.dump();
    listener.expect(name);
    auto start = Clock::now();
    web::http::http_request req(web::http::methods::PUT);
    req.set_request_uri(web::uri("/fake/objects/endpointslices"));
    req.headers().add(web::http::header_names::content_type, "application/json");
    req.set_body(std::vector<unsigned char>(body.begin(), body.end()));
    auto pending = control.request(req);
    Clock::time_point seen;
    bool ok = listener.waitSeen(std::chrono::milliseconds(5000), seen);
    auto resp = pending.get();
    if (!ok || resp.status_code() != 200) {
      fprintf(stderr, "control_bench: change %d never reached the listener\n", i);
      return 1;
    }
    auto answer = nlohmann::json::parse(resp.extract_utf8string(true).get(), nullptr, false);
    if (answer.is_discarded() || !answer.contains("appliedAtNs")) {
      fprintf(stderr, "control_bench: the fake did not say when it applied change %d\n", i);
      return 1;
    }
    Clock::time_point applied{std::chrono::nanoseconds(answer["appliedAtNs"].get<int64_t>())};
    lat.push_back(ms(seen - applied));
    lat_e2e.push_back(ms(seen - start));
  }
  auto report = [](std::vector<double>& v, const char* prefix) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
    printf("%sp50_ms %.3f\n%sp99_ms %.3f\n%smax_ms %.3f\n", prefix, pct(0.50), prefix, pct(0.99), prefix, v.back());
  };
  if (!lat.empty()) {
    printf("changes %zu\n", lat.size());
    report(lat, "");
    report(lat_e2e, "e2e_");
  }
  auto st = source.stats();
  printf("malformed %llu\nwatch_restarts %llu\n", static_cast<unsigned long long>(st.malformed),
         static_cast<unsigned long long>(st.watch_restarts));
  source.stop();
  return 0;
}
