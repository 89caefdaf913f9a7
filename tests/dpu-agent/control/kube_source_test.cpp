// The Kubernetes ClusterSource against the fake API server (real HTTP/1.1 and
// TLS on loopback, real chunked watches): initial sync, ordered updates,
// bookmarks, 410 Gone → relist with only the differences, dropped streams
// resumed without duplicates, 401 and unreachable servers with backoff and
// recovery, token rotation, the node patch, malformed objects.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "control/kube_objects.h"
#include "control/kube_node_label.h"
#include "control/kube_source.h"
#include "fake_kube_apiserver.h"

using namespace dpu::control;
using dpu::fakes::FakeKubeApiServerOptions;
using dpu::fakes::KubeResource;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Every fake API server here authenticates the agent as the ServiceAccount of
// manifests/base/agent-rbac and enforces that directory's ClusterRole and
// binding: a verb the manifests lack fails the test that needs it (the request
// is refused with 403 and listed in the denials), and the last test case
// reports every grant no test used.
struct RbacEvidence {
  std::mutex mu;
  std::vector<std::string> denials;
  std::map<std::string, bool> grants;  // describe() -> used by some test
};
RbacEvidence& rbacEvidence() {
  static RbacEvidence e;
  return e;
}

class FakeKubeApiServer : public dpu::fakes::FakeKubeApiServer {
 public:
  ~FakeKubeApiServer() {
    auto& e = rbacEvidence();
    std::lock_guard<std::mutex> lock(e.mu);
    for (auto& d : rbacDenials()) e.denials.push_back(d);
    for (const auto& g : rbacGrants()) e.grants[g.describe()] = e.grants[g.describe()] || g.used;
  }
  dpu::Result<void> start(FakeKubeApiServerOptions options) {
    std::string dir = std::string(DPU_SOURCE_DIR) + "/manifests/base/agent-rbac/";
    options.rbac_files = {dir + "clusterrole.yaml", dir + "clusterrolebinding.yaml"};
    options.user = {"system:serviceaccount:dpu-cni:dpu-agent", {"system:serviceaccounts", "system:serviceaccounts:dpu-cni"}};
    return dpu::fakes::FakeKubeApiServer::start(options);
  }
};

// A CA and a server certificate for 127.0.0.1, made once per test process.
struct Pki {
  fs::path dir;
  bool ok = false;
  Pki() {
    dir = fs::temp_directory_path() / ("kube_source_test." + std::to_string(getpid()));
    fs::create_directories(dir);
    std::string d = dir.string();
    std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string cmd =
        "set -e; cd '" + d + "'; "
        "openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca; "
        "openssl req -x509 " + ec + " -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca; "
        "openssl req " + ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1; "
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext; "
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
        "-extfile san.ext";
    ok = std::system(("bash -c \"" + cmd + "\" >/dev/null 2>&1").c_str()) == 0;
  }
  ~Pki() { fs::remove_all(dir); }
  std::string file(const char* name) const { return (dir / name).string(); }
  std::string read(const char* name) const {
    std::ifstream in(file(name));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

const Pki& pki() {
  static Pki p;
  REQUIRE(p.ok);
  return p;
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kube_source_test." + std::to_string(getpid()) + ".d" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

json pod(const std::string& ns, const std::string& name, const std::string& ip, const std::string& node = "node-a") {
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"labels", {{"app", "web"}}}}},
          {"spec", {{"nodeName", node}, {"containers", json::array({{{"name", "c"}}})}}},
          {"status", {{"phase", "Running"}, {"podIP", ip}, {"podIPs", json::array({{{"ip", ip}}})}}}};
}

json node(const std::string& name, const std::string& cidr) {
  return {{"metadata", {{"name", name}}}, {"spec", {{"podCIDR", cidr}, {"podCIDRs", json::array({cidr})}}}};
}

class RecordingListener : public ClusterListener {
 public:
  void nodeUpserted(const NodeInfo& n) override { add("node+ " + n.name + " " + n.tunnel_ip, [&] { nodes[n.name] = n; }); }
  void nodeDeleted(const std::string& name) override { add("node- " + name, [&] { nodes.erase(name); }); }
  void podUpserted(const PodInfo& p) override {
    add("pod+ " + p.ns + "/" + p.name + " " + (p.ips.empty() ? "" : p.ips[0]), [&] { pods[p.ns + "/" + p.name] = p; });
  }
  void podDeleted(const std::string& ns, const std::string& name) override {
    add("pod- " + ns + "/" + name, [&] { pods.erase(ns + "/" + name); });
  }
  void serviceUpserted(const ServiceInfo& s) override {
    add("svc+ " + s.ns + "/" + s.name, [&] { services[s.ns + "/" + s.name] = s; });
  }
  void serviceDeleted(const std::string& ns, const std::string& name) override { add("svc- " + ns + "/" + name, [] {}); }
  void endpointSliceUpserted(const EndpointSliceInfo& s) override {
    add("eps+ " + s.ns + "/" + s.name, [&] { slices[s.ns + "/" + s.name] = s; });
  }
  void endpointSliceDeleted(const std::string& ns, const std::string& name) override {
    add("eps- " + ns + "/" + name, [] {});
  }
  void networkPolicyUpserted(const NetworkPolicyInfo& p) override {
    add("np+ " + p.ns + "/" + p.name, [&] { policies[p.ns + "/" + p.name] = p; });
  }
  void networkPolicyDeleted(const std::string& ns, const std::string& name) override {
    add("np- " + ns + "/" + name, [] {});
  }
  void namespaceUpserted(const NamespaceInfo& n) override { add("ns+ " + n.name, [&] { namespaces[n.name] = n; }); }
  void namespaceDeleted(const std::string& name) override { add("ns- " + name, [&] { namespaces.erase(name); }); }
  void synced() override { add("synced", [&] { syncs++; }); }

  template <class Pred>
  bool waitFor(Pred pred, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, [&] { return pred(); });
  }
  // Events recorded since `mark` (an index into log).
  std::vector<std::string> since(size_t mark) {
    std::lock_guard<std::mutex> lock(mu);
    return std::vector<std::string>(log.begin() + static_cast<long>(mark), log.end());
  }
  size_t mark() {
    std::lock_guard<std::mutex> lock(mu);
    return log.size();
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> log;
  std::map<std::string, PodInfo> pods;
  std::map<std::string, NodeInfo> nodes;
  std::map<std::string, ServiceInfo> services;
  std::map<std::string, EndpointSliceInfo> slices;
  std::map<std::string, NetworkPolicyInfo> policies;
  std::map<std::string, NamespaceInfo> namespaces;
  int syncs = 0;

 private:
  template <class F>
  void add(std::string line, F&& apply) {
    std::lock_guard<std::mutex> lock(mu);
    apply();
    log.push_back(std::move(line));
    cv.notify_all();
  }
};

KubeSourceConfig testConfig() {
  KubeSourceConfig c;
  c.node_name = "node-a";
  c.page_size = 2;  // several pages even for a handful of objects
  c.backoff_initial = 20ms;
  c.backoff_max = 300ms;
  c.watch_timeout = 30s;
  c.request_timeout = 5s;
  return c;
}

KubeConnection plain(const FakeKubeApiServer& fake, const std::string& token = "") {
  KubeConnection k;
  k.server = fake.url();
  k.token = token;
  k.origin = "test";
  return k;
}

std::unique_ptr<ClusterSource> make(const KubeSourceConfig& c, const KubeConnection& k) {
  auto r = makeKubernetesSource(c, k);
  REQUIRE(r.ok());
  return std::move(r).value();
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace

TEST_CASE("kube source: HTTPS with a kubeconfig — paginated sync, then updates in order", "[kube]") {
  const Pki& p = pki();
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.cert_file = p.file("server.crt");
  opt.key_file = p.file("server.key");
  opt.token = "secret-token";
  REQUIRE(fake.start(opt).ok());
  for (int i = 0; i < 5; ++i) REQUIRE(fake.apply(KubeResource::kPods, pod("default", "p" + std::to_string(i), "10.244.1." + std::to_string(i + 2))).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("node-a", "10.244.1.0/24")).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("node-b", "10.244.2.0/24")).ok());
  REQUIRE(fake.apply(KubeResource::kServices, {{"metadata", {{"name", "web"}, {"namespace", "default"}}},
                                               {"spec", {{"clusterIP", "10.96.0.10"}, {"ports", {{{"port", 80}}}}}}})
              .ok());
  REQUIRE(fake.apply(KubeResource::kEndpointSlices,
                     {{"metadata", {{"name", "web-x"}, {"namespace", "default"}, {"labels", {{"kubernetes.io/service-name", "web"}}}}},
                      {"addressType", "IPv4"},
                      {"endpoints", {{{"addresses", {"10.244.1.2"}}}}}})
              .ok());
  REQUIRE(fake.apply(KubeResource::kNetworkPolicies,
                     {{"metadata", {{"name", "deny"}, {"namespace", "default"}}}, {"spec", {{"podSelector", json::object()}}}})
              .ok());

  TempDir dir;
  dir.write("ca.crt", p.read("ca.crt"));
  std::string kubeconfig = dir.write("config", "current-context: t\n"
                                               "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
                                               "clusters: [{name: c, cluster: {server: \"" + fake.url() +
                                                   "\", certificate-authority: ca.crt}}]\n"
                                               "users: [{name: u, user: {token: secret-token}}]\n");
  KubeSourceConfig cfg = testConfig();
  cfg.kubeconfig = kubeconfig;
  auto made = makeKubernetesSource(cfg);
  REQUIRE(made.ok());
  auto& source = *made.value();
  CHECK(source.kind() == "kubernetes");
  RecordingListener l;
  REQUIRE(source.start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  {
    std::lock_guard<std::mutex> lock(l.mu);
    CHECK(l.pods.size() == 5);
    CHECK(l.nodes.size() == 2);
    CHECK(l.nodes["node-b"].pod_cidrs == std::vector<std::string>{"10.244.2.0/24"});
    CHECK(std::count(l.log.begin(), l.log.end(), "svc+ default/web") == 1);
    CHECK(std::count(l.log.begin(), l.log.end(), "eps+ default/web-x") == 1);
    CHECK(std::count(l.log.begin(), l.log.end(), "np+ default/deny") == 1);
    CHECK(l.log.back() == "synced");
  }
  CHECK(fake.stats().lists >= 3 + 4);  // five pods at two a page: three pages

  size_t mark = l.mark();
  for (int i = 10; i < 15; ++i) REQUIRE(fake.apply(KubeResource::kPods, pod("default", "p0", "10.244.1." + std::to_string(i))).ok());
  REQUIRE(fake.remove(KubeResource::kPods, "default", "p1"));
  REQUIRE(l.waitFor([&] { return l.log.size() >= mark + 6; }));
  CHECK(l.since(mark) == std::vector<std::string>{"pod+ default/p0 10.244.1.10", "pod+ default/p0 10.244.1.11",
                                                   "pod+ default/p0 10.244.1.12", "pod+ default/p0 10.244.1.13",
                                                   "pod+ default/p0 10.244.1.14", "pod- default/p1"});
  // A change the agent does not read is not delivered.
  json same = pod("default", "p2", "10.244.1.4");
  same["status"]["phase"] = "Succeeded";
  REQUIRE(fake.apply(KubeResource::kPods, same).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("default", "p3", "10.244.1.99")).ok());
  REQUIRE(l.waitFor([&] { return l.log.size() >= mark + 7; }));
  CHECK(l.since(mark).back() == "pod+ default/p3 10.244.1.99");
  CHECK(l.since(mark).size() == 7);
  source.stop();
  auto after = l.mark();
  // No callback after stop(), and no watch left: the server writes the next
  // changes to every watch it holds, and a watch whose client is gone ends
  // (the second write fails). Once none is open, nothing can come.
  REQUIRE(fake.apply(KubeResource::kPods, pod("default", "late", "10.244.1.50")).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("default", "later", "10.244.1.51")).ok());
  REQUIRE(eventually([&] { return fake.stats().open_watches == 0; }));
  CHECK(l.mark() == after);
  CHECK(source.stats().malformed == 0);
  CHECK(source.stats().synced);
  // Every delivered change is counted under its kind.
  auto st = source.stats();
  uint64_t sum = 0;
  for (auto n : st.events_by_kind) sum += n;
  CHECK(sum == st.events);
  CHECK(st.events_by_kind[static_cast<size_t>(ObjectKind::kPod)] > 0);
  CHECK(st.events_by_kind[static_cast<size_t>(ObjectKind::kNode)] > 0);
}

TEST_CASE("kube source: wrong CA — refused, reported, never synced", "[kube]") {
  const Pki& p = pki();
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.cert_file = p.file("server.crt");
  opt.key_file = p.file("server.key");
  REQUIRE(fake.start(opt).ok());
  KubeConnection k = plain(fake);
  k.ca_pem = p.read("other-ca.crt");
  auto source = make(testConfig(), k);
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  CHECK(eventually([&] { return !source->stats().last_error.empty(); }));
  // It tried again and was refused again: no request ever got through.
  REQUIRE(eventually([&] { return fake.stats().tls_handshake_failures >= 2; }));
  CHECK(fake.stats().lists == 0);
  CHECK(l.mark() == 0);
  source->stop();

  // insecure-skip-tls-verify: the same server is accepted without a CA.
  KubeConnection insecure = plain(fake);
  insecure.insecure_skip_tls_verify = true;
  auto trusting = make(testConfig(), insecure);
  RecordingListener l2;
  REQUIRE(trusting->start(l2).ok());
  REQUIRE(l2.waitFor([&] { return l2.syncs == 1; }));
  trusting->stop();

  KubeConnection bad = plain(fake);
  bad.ca_pem = "not a certificate";
  auto refused = makeKubernetesSource(testConfig(), bad);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error(), Catch::Contains("PEM"));
}

TEST_CASE("kube source: in-cluster token refused (401), then rotated — backoff and recovery", "[kube]") {
  const Pki& p = pki();
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.cert_file = p.file("server.crt");
  opt.key_file = p.file("server.key");
  opt.token = "new-token";
  REQUIRE(fake.start(opt).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("kube-system", "a", "10.244.1.2")).ok());
  TempDir sa;
  std::string token_file = sa.write("token", "old-token\n");
  sa.write("ca.crt", p.read("ca.crt"));
  sa.write("namespace", "kube-system");
  KubeSourceConfig cfg = testConfig();
  cfg.in_cluster_dir = sa.path.string();
  cfg.api_server = fake.url();
  cfg.resources = {ObjectKind::kPod};
  auto made = makeKubernetesSource(cfg);
  REQUIRE(made.ok());
  auto& source = *made.value();
  RecordingListener l;
  REQUIRE(source.start(l).ok());
  REQUIRE(eventually([&] { return source.stats().last_error.find("401") != std::string::npos; }));
  CHECK_THAT(source.stats().last_error, Catch::Contains("token"));
  CHECK(l.mark() == 0);
  // Backoff, not a spin: after its k-th refusal (from 0) the source waits at
  // least half of 20 ms * 2^k, at most 300 ms (testConfig, kube_source.cpp's
  // jitter). The clock starts before the count is read, so the next two
  // refusals both come after it, and the waits between the three that follow
  // are a lower bound a loaded machine can only exceed.
  auto t0 = std::chrono::steady_clock::now();
  uint64_t refused = fake.stats().unauthorized;
  REQUIRE(eventually([&] { return fake.stats().unauthorized >= refused + 3; }));
  auto waited = std::chrono::steady_clock::now() - t0;
  auto shortest = [](uint64_t k) { return std::chrono::milliseconds(std::min<uint64_t>(uint64_t{10} << std::min<uint64_t>(k, 8), 150)); };
  CHECK(waited >= shortest(refused) + shortest(refused + 1));

  sa.write("token", "new-token\n");  // the kubelet rotates the token
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));

  // Rotation again while watching: the old token stops working, the stream
  // breaks, and the source reconnects with the new file contents.
  fake.setToken("newer-token");
  uint64_t before = fake.stats().unauthorized;
  fake.dropWatches();
  // It comes back with the token it has and is refused, until the kubelet
  // writes the new one.
  REQUIRE(eventually([&] { return fake.stats().unauthorized > before; }));
  sa.write("token", "newer-token\n");
  size_t mark = l.mark();
  REQUIRE(fake.apply(KubeResource::kPods, pod("kube-system", "a", "10.244.1.3")).ok());
  REQUIRE(l.waitFor([&] { return l.log.size() > mark; }));
  CHECK(l.since(mark)[0] == "pod+ kube-system/a 10.244.1.3");
  source.stop();
}

TEST_CASE("kube source: unreachable server — backoff, then sync when it comes up", "[kube]") {
  uint16_t port;
  {
    FakeKubeApiServer probe;
    REQUIRE(probe.start({}).ok());
    port = probe.port();
  }
  KubeConnection k;
  k.server = "http://127.0.0.1:" + std::to_string(port);
  k.origin = "test";
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNode};
  auto source = make(cfg, k);
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(eventually([&] { return !source->stats().last_error.empty(); }));
  CHECK_FALSE(source->stats().synced);
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.port = port;
  REQUIRE(fake.apply(KubeResource::kNodes, node("node-a", "10.244.1.0/24")).ok());
  REQUIRE(fake.start(opt).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  CHECK(l.nodes.count("node-a") == 1);
  source->stop();
}

TEST_CASE("kube source: bookmarks keep the watch's resourceVersion inside the history", "[kube]") {
  for (bool bookmarks : {true, false}) {
    DYNAMIC_SECTION("bookmarks " << bookmarks) {
      FakeKubeApiServer fake;
      FakeKubeApiServerOptions opt;
      opt.bookmark_interval = bookmarks ? 50ms : 0ms;
      REQUIRE(fake.start(opt).ok());
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.2")).ok());
      KubeSourceConfig cfg = testConfig();
      cfg.resources = {ObjectKind::kPod, ObjectKind::kNode};
      auto source = make(cfg, plain(fake));
      RecordingListener l;
      REQUIRE(source->start(l).ok());
      REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
      // Only nodes change: the pod watch sees no events, only bookmarks.
      for (int i = 0; i < 5; ++i)
        REQUIRE(fake.apply(KubeResource::kNodes, node("n" + std::to_string(i), "10.0." + std::to_string(i) + ".0/24")).ok());
      // The node watch has them all (else it, too, would be behind the compaction).
      REQUIRE(l.waitFor([&] { return l.nodes.count("n4") == 1; }));
      if (bookmarks) {
        // A bookmark as new as the node changes went out on the pod watch; the
        // drop below closes the stream after it, so the source reads it first.
        uint64_t rv = fake.resourceVersion();
        REQUIRE(eventually([&] { return fake.stats().last_bookmark_rv[static_cast<size_t>(KubeResource::kPods)] >= rv; }));
      }
      fake.compact();
      fake.dropWatches();
      size_t mark = l.mark();
      REQUIRE(eventually([&] { return fake.stats().open_watches == 2; }));
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "b", "10.244.1.3")).ok());
      REQUIRE(l.waitFor([&] {
        return std::find(l.log.begin() + static_cast<long>(mark), l.log.end(), "pod+ d/b 10.244.1.3") != l.log.end();
      }));
      // With bookmarks the pod watch resumes; without, its version is older
      // than the compacted history and it must relist. A relist is counted
      // before the watch after it starts: once a later change has come through
      // the watch, the count is final.
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "c", "10.244.1.4")).ok());
      REQUIRE(l.waitFor([&] {
        return std::find(l.log.begin() + static_cast<long>(mark), l.log.end(), "pod+ d/c 10.244.1.4") != l.log.end();
      }));
      CHECK(source->stats().relists == (bookmarks ? 0u : 1u));
      source->stop();
    }
  }
}

TEST_CASE("kube source: 410 Gone relists and delivers only the differences", "[kube]") {
  for (bool as_status : {false, true}) {
    DYNAMIC_SECTION("410 as " << (as_status ? "HTTP status" : "ERROR event")) {
      FakeKubeApiServer fake;
      FakeKubeApiServerOptions opt;
      opt.bookmark_interval = 0ms;
      opt.gone_as_status = as_status;
      REQUIRE(fake.start(opt).ok());
      for (const char* n : {"a", "b", "d"}) REQUIRE(fake.apply(KubeResource::kPods, pod("d", n, "10.244.1.2")).ok());
      KubeSourceConfig cfg = testConfig();
      cfg.resources = {ObjectKind::kPod};
      auto source = make(cfg, plain(fake));
      RecordingListener l;
      REQUIRE(source->start(l).ok());
      REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
      size_t mark = l.mark();
      fake.pauseWatches(true);
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.9")).ok());  // changed
      REQUIRE(fake.remove(KubeResource::kPods, "d", "b"));                          // deleted
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "c", "10.244.1.7")).ok());  // added
      json d = pod("d", "d", "10.244.1.2");
      d["status"]["phase"] = "Failed";  // changed, but nothing the agent reads
      REQUIRE(fake.apply(KubeResource::kPods, d).ok());
      fake.compact();
      if (as_status) fake.dropWatches();  // the re-watch from the old version gets HTTP 410
      fake.pauseWatches(false);
      REQUIRE(l.waitFor([&] { return l.syncs == 2; }));
      CHECK(l.since(mark) ==
            std::vector<std::string>{"pod+ d/a 10.244.1.9", "pod+ d/c 10.244.1.7", "pod- d/b", "synced"});
      CHECK(source->stats().relists == 1);
      // And the watch carries on from the relist.
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "e", "10.244.1.8")).ok());
      REQUIRE(l.waitFor([&] { return l.log.back() == "pod+ d/e 10.244.1.8"; }));
      source->stop();
    }
  }
}

TEST_CASE("kube source: one kind's 410 relists that kind only", "[kube]") {
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.bookmark_interval = 0ms;  // an idle watch keeps its old version
  REQUIRE(fake.start(opt).ok());
  for (const char* n : {"a", "b"}) REQUIRE(fake.apply(KubeResource::kPods, pod("d", n, "10.244.1.2")).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("n0", "10.0.0.0/24")).ok());
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNode, ObjectKind::kPod};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  REQUIRE(eventually([&] { return fake.stats().open_watches == 2; }));
  // The pods' watch is cut and cannot come back for a while; meanwhile pods
  // change, a node changes (the node watch, back at once, sees it) and the
  // history is compacted: the pods' version is now too old, the nodes' not.
  fake.failResource(KubeResource::kPods, 503);
  fake.dropWatches();
  REQUIRE(eventually([&] { return fake.stats().injected_failures >= 1 && fake.stats().open_watches == 1; }));
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.9")).ok());
  REQUIRE(fake.remove(KubeResource::kPods, "d", "b"));
  REQUIRE(fake.apply(KubeResource::kNodes, node("n1", "10.0.1.0/24")).ok());
  REQUIRE(l.waitFor([&] { return l.nodes.count("n1") == 1; }));
  fake.compact();
  size_t mark = l.mark();
  fake.failResource(KubeResource::kPods, 0);
  // The pod reflector gets 410, relists and delivers what it missed, nothing
  // more; the node reflector goes on watching.
  REQUIRE(l.waitFor([&] { return l.syncs == 2; }));
  CHECK(l.since(mark) == std::vector<std::string>{"pod+ d/a 10.244.1.9", "pod- d/b", "synced"});
  REQUIRE(fake.apply(KubeResource::kNodes, node("n2", "10.0.2.0/24")).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "c", "10.244.1.3")).ok());
  REQUIRE(l.waitFor([&] { return l.nodes.count("n2") == 1 && l.pods.count("d/c") == 1; }));
  auto st = source->stats();
  CHECK(st.relists_by_kind[static_cast<size_t>(ObjectKind::kPod)] == 1);
  CHECK(st.relists_by_kind[static_cast<size_t>(ObjectKind::kNode)] == 0);
  CHECK(st.relists == 1);
  source->stop();
}

TEST_CASE("kube source: a failing kind backs off alone; the others sync and watch", "[kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.2")).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("n0", "10.0.0.0/24")).ok());
  fake.failResource(KubeResource::kPods, 503);
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNode, ObjectKind::kPod, ObjectKind::kNamespace};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  // Pods cannot be listed: the others are listed and watched all the same.
  REQUIRE(l.waitFor([&] { return l.nodes.count("n0") == 1; }));
  REQUIRE(fake.apply(KubeResource::kNodes, node("n1", "10.0.1.0/24")).ok());
  REQUIRE(fake.apply(KubeResource::kNamespaces, {{"metadata", {{"name", "x"}}}}).ok());
  REQUIRE(l.waitFor([&] { return l.nodes.count("n1") == 1; }));
  REQUIRE(l.waitFor([&] {
    return std::find(l.log.begin(), l.log.end(), "ns+ x") != l.log.end();
  }));
  // ... while the pods are retried (with backoff) and the reason is reported.
  REQUIRE(eventually([&] { return fake.stats().injected_failures >= 2; }));
  CHECK_THAT(source->stats().last_error, Catch::Contains("listing Pods") && Catch::Contains("HTTP 503"));
  CHECK(l.syncs == 0);  // not every kind is listed
  CHECK(l.pods.empty());
  // The pods come back: the source completes its sync.
  fake.failResource(KubeResource::kPods, 0);
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  CHECK(l.pods.count("d/a") == 1);
  // Later the pods fail again (their watch is cut and cannot come back):
  // node changes still flow.
  fake.failResource(KubeResource::kPods, 503);
  uint64_t failed = fake.stats().injected_failures;
  fake.dropWatches();
  REQUIRE(eventually([&] { return fake.stats().injected_failures > failed; }));
  REQUIRE(fake.apply(KubeResource::kNodes, node("n2", "10.0.2.0/24")).ok());
  REQUIRE(l.waitFor([&] { return l.nodes.count("n2") == 1; }));
  fake.failResource(KubeResource::kPods, 0);
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "b", "10.244.1.3")).ok());
  REQUIRE(l.waitFor([&] { return l.pods.count("d/b") == 1; }));
  CHECK(source->stats().relists_by_kind[static_cast<size_t>(ObjectKind::kNode)] == 0);
  source->stop();
}

TEST_CASE("kube source: a dropped stream resumes from the last version without duplicates", "[kube]") {
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.bookmark_interval = 0ms;
  REQUIRE(fake.start(opt).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "x", "10.244.1.1")).ok());
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kPod};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  REQUIRE(eventually([&] { return fake.stats().open_watches == 1; }));
  size_t mark = l.mark();
  std::vector<std::string> want;
  for (int i = 2; i < 22; ++i) {
    if (i == 8 || i == 15) {
      // Once the watch is streaming, cut it: at 8 after half an event line,
      // at 15 between events. Changes 8..14 land while it reconnects.
      REQUIRE(l.waitFor([&] { return l.log.size() == mark + want.size(); }));
      uint64_t watches = fake.stats().watches;
      REQUIRE(eventually([&] { return fake.stats().open_watches == 1; }));
      fake.dropWatches(i == 8);
      REQUIRE(eventually([&] { return fake.stats().watches > watches || i == 8; }));
    }
    std::string ip = "10.244.1." + std::to_string(i);
    REQUIRE(fake.apply(KubeResource::kPods, pod("d", "x", ip)).ok());
    want.push_back("pod+ d/x " + ip);
  }
  REQUIRE(l.waitFor([&] { return l.log.size() >= mark + want.size(); }));
  // A duplicate would come before a later change on the same stream: once
  // that change is in, the log is complete.
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "x", "10.244.1.99")).ok());
  want.push_back("pod+ d/x 10.244.1.99");
  REQUIRE(l.waitFor([&] { return l.log.size() >= mark + want.size(); }));
  CHECK(l.since(mark) == want);
  auto st = source->stats();
  CHECK(st.relists == 0);
  CHECK(st.watch_restarts >= 2);
  CHECK(st.malformed == 0);  // the cut line is discarded, not counted
  CHECK(l.syncs == 1);
  source->stop();
}

TEST_CASE("kube source: a periodic relist finds what a silent watch missed", "[kube]") {
  FakeKubeApiServer fake;
  FakeKubeApiServerOptions opt;
  opt.bookmark_interval = 0ms;
  REQUIRE(fake.start(opt).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.2")).ok());
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kPod};
  cfg.watch_timeout = 1s;
  cfg.relist_period = 1s;
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  size_t mark = l.mark();
  fake.pauseWatches(true);  // the watch stays open but says nothing
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.9")).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 2; }, 5s));
  CHECK(l.since(mark) == std::vector<std::string>{"pod+ d/a 10.244.1.9", "synced"});
  CHECK(source->stats().relists >= 1);
  source->stop();
}

TEST_CASE("kube source: publishSelf patches the Node's annotations", "[kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("node-a", "10.244.1.0/24")).ok());
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNode};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  SelfEntry keyed{"", "100.64.0.7", "cHVibGljLWtleQ=="};
  keyed.ipsec_epoch = 3;
  keyed.ipsec_mode = "on";
  keyed.ipsec_nat_address = "198.51.100.7";
  auto r = source->publishSelf(keyed);
  REQUIRE(r.ok());
  auto n = fake.get(KubeResource::kNodes, "", "node-a");
  REQUIRE(n.has_value());
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/tunnel-ip"] == "100.64.0.7");
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/ipsec-public-key"] == "cHVibGljLWtleQ==");
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/ipsec-epoch"] == "3");
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/ipsec-mode"] == "on");
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/ipsec-nat-address"] == "198.51.100.7");
  CHECK((*n)["spec"]["podCIDR"] == "10.244.1.0/24");  // a merge patch leaves the rest alone
  CHECK(fake.stats().last_patch_content_type.rfind("application/merge-patch+json", 0) == 0);
  // The others see it through their watch.
  REQUIRE(l.waitFor([&] { return l.nodes["node-a"].tunnel_ip == "100.64.0.7"; }));
  CHECK(l.nodes["node-a"].ipsec_public_key == "cHVibGljLWtleQ==");
  CHECK(l.nodes["node-a"].ipsec_epoch == 3);
  CHECK(l.nodes["node-a"].ipsec_mode == "on");
  CHECK(l.nodes["node-a"].ipsec_nat_address == "198.51.100.7");
  CHECK(l.nodes["node-a"].port_keys.empty());
  CHECK((*n)["metadata"]["annotations"]["dpu-cni.io/port-keys"] == "{}");

  // The port keys, republished on every attach and detach, reach the others.
  SelfEntry self{"", "100.64.0.7", "", {{"10.244.1.5", 3}, {"fd00::5", 3}, {"10.244.1.6", 9}}};
  REQUIRE(source->publishSelf(self).ok());
  REQUIRE(l.waitFor([&] { return l.nodes["node-a"].port_keys.size() == 3; }));
  // No IPsec key any more (IPsec off): both annotations are gone, the others see none.
  CHECK(l.nodes["node-a"].ipsec_public_key.empty());
  CHECK(l.nodes["node-a"].ipsec_epoch == 0);
  n = fake.get(KubeResource::kNodes, "", "node-a");
  CHECK_FALSE((*n)["metadata"]["annotations"].contains("dpu-cni.io/ipsec-public-key"));
  CHECK_FALSE((*n)["metadata"]["annotations"].contains("dpu-cni.io/ipsec-epoch"));
  CHECK_FALSE((*n)["metadata"]["annotations"].contains("dpu-cni.io/ipsec-mode"));
  CHECK_FALSE((*n)["metadata"]["annotations"].contains("dpu-cni.io/ipsec-nat-address"));  // no NAT any more
  CHECK(l.nodes["node-a"].ipsec_nat_address.empty());
  CHECK(l.nodes["node-a"].port_keys == self.port_keys);
  self.port_keys.erase("10.244.1.6");
  REQUIRE(source->publishSelf(self).ok());
  REQUIRE(l.waitFor([&] { return l.nodes["node-a"].port_keys.size() == 2; }));
  // A bad annotation makes the Node malformed (as a bad tunnel IP does), named.
  auto bad = parsePortKeysAnnotation("{\"10.244.1.5\": 40000}");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains("must be a number 1..32767"));
  CHECK_FALSE(parsePortKeysAnnotation("[1]").ok());
  CHECK_FALSE(parsePortKeysAnnotation("{\"x\": 1}").ok());

  auto bad_ip = source->publishSelf({"", "not-an-ip", ""});
  REQUIRE_FALSE(bad_ip.ok());
  CHECK_THAT(bad_ip.error(), Catch::Contains("not an IP address"));
  auto unknown = source->publishSelf({"node-zz", "100.64.0.8", ""});
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error(), Catch::Contains("no such Node"));
  source->stop();
}

TEST_CASE("kube source: malformed objects are skipped, counted, and the last good version kept", "[kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "good", "10.244.1.2")).ok());
  fake.applyRaw(KubeResource::kPods, "d", "bad",
                R"({"metadata":{"name":"bad","namespace":"d"},"status":{"podIPs":[{"ip":"10.244.1.300"}]}})");
  fake.applyRaw(KubeResource::kPods, "d", "worse", R"({"metadata":{"name":["worse"],"namespace":"d"}})");
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kPod};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  CHECK(l.pods.size() == 1);
  CHECK(source->stats().malformed == 2);
  // A good pod turned bad through the watch: skipped, the good version stays.
  size_t mark = l.mark();
  fake.applyRaw(KubeResource::kPods, "d", "good",
                R"({"metadata":{"name":"good","namespace":"d","resourceVersion":"1"},"spec":{"nodeName":5}})");
  REQUIRE(eventually([&] { return source->stats().malformed == 3; }));
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "next", "10.244.1.5")).ok());
  REQUIRE(l.waitFor([&] { return l.log.size() > mark; }));
  CHECK(l.since(mark) == std::vector<std::string>{"pod+ d/next 10.244.1.5"});
  CHECK(l.pods["d/good"].ips == std::vector<std::string>{"10.244.1.2"});
  source->stop();
}

TEST_CASE("kube source: Namespaces, Services, EndpointSlices and NetworkPolicies whole, through the API", "[kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  REQUIRE(fake.apply(KubeResource::kNamespaces, {{"metadata", {{"name", "shop"}, {"labels", {{"team", "a"}}}}}}).ok());
  REQUIRE(fake.apply(KubeResource::kServices,
                     json::parse(R"({"metadata":{"name":"web","namespace":"shop","labels":{"app":"web"}},
                       "spec":{"type":"NodePort","clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],
                       "ports":[{"name":"http","port":80,"targetPort":"http","nodePort":30080}],
                       "sessionAffinity":"ClientIP","externalTrafficPolicy":"Local"},
                       "status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.7"}]}}})"))
              .ok());
  REQUIRE(fake.apply(KubeResource::kEndpointSlices,
                     json::parse(R"({"metadata":{"name":"web-x","namespace":"shop",
                       "labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4",
                       "endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":false,"terminating":true},
                       "nodeName":"node-a","targetRef":{"kind":"Pod","namespace":"shop","name":"web-1"}}],
                       "ports":[{"name":"http","port":8080}]})"))
              .ok());
  REQUIRE(fake.apply(KubeResource::kNetworkPolicies,
                     json::parse(R"({"metadata":{"name":"web","namespace":"shop"},"spec":{
                       "podSelector":{"matchLabels":{"app":"web"}},
                       "egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}}],
                                  "ports":[{"port":53,"protocol":"UDP"}]}]}})"))
              .ok());
  // What no real API server would hold: refused by the agent, named, counted.
  fake.applyRaw(KubeResource::kServices, "shop", "dup",
                R"({"metadata":{"name":"dup","namespace":"shop"},"spec":{"clusterIP":"10.96.0.11",
                    "ports":[{"name":"a","port":80},{"name":"b","port":80}]}})");
  fake.applyRaw(KubeResource::kNetworkPolicies, "shop", "bad",
                R"({"metadata":{"name":"bad","namespace":"shop"},"spec":{"ingress":[{"ports":[{"port":80,"endPort":70}]}]}})");
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNamespace, ObjectKind::kService, ObjectKind::kEndpointSlice, ObjectKind::kNetworkPolicy};
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  REQUIRE(source->start(l).ok());
  REQUIRE(l.waitFor([&] { return l.syncs == 1; }));
  {
    std::lock_guard<std::mutex> lock(l.mu);
    // The fake, as a real server, labels every namespace with its name.
    CHECK(l.namespaces.at("shop").labels ==
          std::map<std::string, std::string>{{"kubernetes.io/metadata.name", "shop"}, {"team", "a"}});
    const ServiceInfo& s = l.services.at("shop/web");
    CHECK(s.type == ServiceType::kNodePort);
    CHECK(s.ports.at(0) == ServicePort{"http", Protocol::kTcp, 80, PortRef{0, "http"}, 30080});
    CHECK(s.affinity_timeout_seconds == 10800);  // the server's default, as the agent's
    CHECK(s.external_traffic_policy == TrafficPolicy::kLocal);
    CHECK(s.internal_traffic_policy == TrafficPolicy::kCluster);
    CHECK(s.load_balancer_ips == std::vector<std::string>{"203.0.113.7"});
    CHECK(s.labels.at("app") == "web");
    const EndpointInfo& e = l.slices.at("shop/web-x").endpoints.at(0);
    CHECK(e == EndpointInfo{{"10.244.1.5"}, false, true, true, "node-a", {"Pod", "shop", "web-1"}});
    const NetworkPolicyInfo& p = l.policies.at("shop/web");
    CHECK(p.policy_ingress);
    CHECK(p.policy_egress);  // defaulted by the server: it has egress rules
    CHECK(p.egress.at(0).peers.at(0).ip_block == IpBlock{"10.0.0.0/8", {"10.1.0.0/16"}});
    CHECK(p.egress.at(0).ports.at(0) == NetworkPolicyPort{Protocol::kUdp, PortRef{53, ""}, 0});
    CHECK(l.services.count("shop/dup") == 0);
    CHECK(l.policies.count("shop/bad") == 0);
  }
  CHECK(source->stats().malformed == 2);
  // Namespaces are watched like the rest: a new one, a label change, a deletion.
  size_t mark = l.mark();
  REQUIRE(fake.apply(KubeResource::kNamespaces, {{"metadata", {{"name", "tools"}}}}).ok());
  REQUIRE(fake.apply(KubeResource::kNamespaces, {{"metadata", {{"name", "shop"}, {"labels", {{"team", "b"}}}}}}).ok());
  REQUIRE(fake.remove(KubeResource::kNamespaces, "", "tools"));
  REQUIRE(l.waitFor([&] { return l.log.size() >= mark + 3; }));
  CHECK(l.since(mark) == std::vector<std::string>{"ns+ tools", "ns+ shop", "ns- tools"});
  {
    std::lock_guard<std::mutex> lock(l.mu);
    CHECK(l.namespaces.at("shop").labels.at("team") == "b");
  }
  auto st = source->stats();
  CHECK(st.events_by_kind[static_cast<size_t>(ObjectKind::kNamespace)] >= 4);
  source->stop();
}

TEST_CASE("kube source: configuration is checked before anything is contacted", "[kube]") {
  KubeConnection k;
  k.server = "http://127.0.0.1:1";
  k.origin = "test";
  KubeSourceConfig c = testConfig();
  c.page_size = 0;
  CHECK_FALSE(makeKubernetesSource(c, k).ok());
  c = testConfig();
  c.resources.clear();
  CHECK_FALSE(makeKubernetesSource(c, k).ok());
  c = testConfig();
  c.backoff_max = 1ms;
  CHECK_FALSE(makeKubernetesSource(c, k).ok());
  k.server = "10.0.0.1:443";
  CHECK_FALSE(makeKubernetesSource(testConfig(), k).ok());
  KubeSourceConfig in_cluster = testConfig();
  in_cluster.in_cluster_dir = "/nonexistent/serviceaccount";
  in_cluster.api_server = "https://127.0.0.1:6443";
  auto r = makeKubernetesSource(in_cluster);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("/nonexistent/serviceaccount"));
}

TEST_CASE("kube source: the host's node name from the label on the DPU's own Node", "[kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  json dpu = node("node-a-dpu", "10.0.0.0/24");
  REQUIRE(fake.apply(KubeResource::kNodes, dpu).ok());
  KubeConnection k = plain(fake);
  auto missing = readNodeLabel(k, "node-a-dpu", "dpu-cni.io/host-node");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == dpu::ErrorCode::kNotFound);
  CHECK_THAT(missing.error(), Catch::Contains("kubectl label node node-a-dpu dpu-cni.io/host-node=<host node name>"));
  dpu["metadata"]["labels"] = {{"dpu-cni.io/host-node", "node-a"}};
  REQUIRE(fake.apply(KubeResource::kNodes, dpu).ok());
  auto name = readNodeLabel(k, "node-a-dpu", "dpu-cni.io/host-node");
  REQUIRE(name.ok());
  CHECK(*name == "node-a");
  auto nobody = readNodeLabel(k, "no-such-dpu", "dpu-cni.io/host-node");
  REQUIRE_FALSE(nobody.ok());
  CHECK_THAT(nobody.error(), Catch::Contains("no Node no-such-dpu"));
}

// Declared last: Catch runs test cases in declaration order.
TEST_CASE("kube source: the manifests' ClusterRole grants what the agent uses", "[kube]") {
  auto& e = rbacEvidence();
  std::lock_guard<std::mutex> lock(e.mu);
  INFO("requests the manifests' RBAC refused: " << e.denials.size());
  for (const auto& d : e.denials) UNSCOPED_INFO(d);
  CHECK(e.denials.empty());
  REQUIRE_FALSE(e.grants.empty());
  size_t unused = 0;
  for (const auto& [g, used] : e.grants) {
    if (used) continue;
    ++unused;
    std::cout << "RBAC: grant not used by any Kubernetes-source test: " << g << "\n";
  }
  std::cout << "RBAC: " << e.grants.size() - unused << " of " << e.grants.size() << " grants used\n";
}

TEST_CASE("kube source: an API server that hangs holds a request no longer than request_timeout", "[kube]") {
  using dpu::fakes::FakeKubeHang;
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  REQUIRE(fake.apply(KubeResource::kNodes, node("node-a", "10.244.1.0/24")).ok());
  REQUIRE(fake.apply(KubeResource::kPods, pod("d", "a", "10.244.1.2")).ok());
  KubeSourceConfig cfg = testConfig();
  cfg.resources = {ObjectKind::kNode, ObjectKind::kPod};
  cfg.request_timeout = 1s;
  auto source = make(cfg, plain(fake));
  RecordingListener l;
  const auto elapsedMs = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  };
  // How a hung request ends the list of pods: in words, and retried. Each
  // retry is one more request held, so a second held request proves the
  // first was given up (its connection stays open on the server).
  for (auto how : {FakeKubeHang::kNoAnswer, FakeKubeHang::kStalledBody}) {
    const bool body = how == FakeKubeHang::kStalledBody;
    INFO((body ? "a stalled body" : "no answer"));
    fake.hangResource(KubeResource::kPods, how);
    const uint64_t held = fake.stats().hung_requests;
    if (!body) {
      REQUIRE(source->start(l).ok());
      REQUIRE(l.waitFor([&] { return l.nodes.count("node-a") == 1; }));  // the nodes are not held up
    } else {
      // The pods' watch ends and cannot resume (what it missed is compacted
      // away): its relist meets the stall.
      fake.pauseWatches(true);
      REQUIRE(fake.apply(KubeResource::kPods, pod("d", "b", "10.244.1.3")).ok());
      fake.compact();
      fake.dropWatches();
      fake.pauseWatches(false);
    }
    // Both: the HTTP client may send a request again by itself on a fresh
    // connection (a pooled one the server closed), so two held requests alone
    // can come before the source gave up the first.
    const char* const ended = body ? "no more of the answer within 1 s" : "no answer within 1 s";
    const bool retried = eventually(
        [&] {
          return fake.stats().hung_requests >= held + 2 &&
                 source->stats().last_error.find(ended) != std::string::npos;
        },
        8s);
    INFO("held " << fake.stats().hung_requests - held << ", last error: " << source->stats().last_error);
    REQUIRE(retried);
    CHECK_THAT(source->stats().last_error,
               Catch::Contains("listing Pods") && Catch::Contains(ended) && Catch::Contains("the connection is closed"));
    fake.hangResource(KubeResource::kPods, FakeKubeHang::kNone);
    REQUIRE(l.waitFor([&] { return l.syncs >= 1 && l.pods.count("d/a") == 1 && l.pods.count("d/b") == body; }));
  }
  // The Node PATCH: an error at the deadline, not when the server lets go.
  fake.hangResource(KubeResource::kNodes, FakeKubeHang::kNoAnswer);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = source->publishSelf({"", "100.64.0.7", ""});
  const auto ms = elapsedMs(t0);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("patching Node node-a") && Catch::Contains("no answer within 1 s"));
  CHECK(ms < 4'000);  // the 1 s timeout and scheduling, far from the server's hold
  fake.hangResource(KubeResource::kNodes, FakeKubeHang::kNone);
  REQUIRE(source->publishSelf({"", "100.64.0.7", ""}).ok());
  source->stop();
}
