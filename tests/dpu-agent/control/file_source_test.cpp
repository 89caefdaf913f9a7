// The cluster-file source: parsing with named errors, differences only on
// reload, a bad file keeps the last good state, and per-node publish files.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <random>
#include <thread>

#include "common/atomic_file.h"
#include "control/agent_config.h"
#include "control/file_source.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::RecordingListener;
using dpu::control::testing::TempDir;

namespace {

const char* kCluster = R"(
nodes:
  - {name: node-a, tunnelIP: 192.168.50.1, podCIDR: 10.244.1.0/24, labels: {zone: a}}
  - {name: node-b, tunnelIP: 192.168.50.2, podCIDRs: [10.244.2.0/24, "fd00:10:244:2::/64"], ipsecPublicKey: K, ipsecEpoch: 4}
services:
  - {namespace: default, name: web, clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}
endpointSlices:
  - {name: web-1, service: web, endpoints: [{addresses: [10.244.1.5], nodeName: node-a}], ports: [{port: 8080}]}
pods:
  - {name: web-1, nodeName: node-a, uid: u1, ips: [10.244.1.5]}
)";

void write(const std::string& path, const std::string& text) { REQUIRE(dpu::writeFileAtomic(path, text).ok()); }

}  // namespace

TEST_CASE("a cluster file parses into nodes, services, slices and pods") {
  auto s = parseClusterFile(kCluster, "c.yaml");
  REQUIRE(s.ok());
  REQUIRE(s->nodes.size() == 2);
  CHECK(s->nodes["node-a"].labels.at("zone") == "a");
  CHECK(s->nodes["node-b"].pod_cidrs == std::vector<std::string>{"10.244.2.0/24", "fd00:10:244:2::/64"});
  CHECK(s->nodes["node-b"].ipsec_public_key == "K");
  CHECK(s->nodes["node-b"].ipsec_epoch == 4);
  CHECK(s->nodes["node-a"].ipsec_epoch == 0);
  CHECK_THAT(parseClusterFile("nodes: [{name: n, ipsecEpoch: -1}]", "c.yaml").error(), Catch::Contains("ipsecEpoch"));
  const auto& svc = s->services.at("default/web");
  CHECK(svc.type == ServiceType::kClusterIP);
  CHECK(svc.cluster_ips == std::vector<std::string>{"10.96.0.10"});
  CHECK(svc.ports.at(0).target_port == PortRef{8080, ""});
  CHECK(svc.ports.at(0).protocol == Protocol::kTcp);
  CHECK(s->slices.at("default/web-1").endpoints.at(0).addresses.at(0) == "10.244.1.5");
  CHECK(s->pods.at("default/web-1").node_name == "node-a");
  auto empty = parseClusterFile("", "e.yaml");
  REQUIRE(empty.ok());
  CHECK(empty->nodes.empty());
}

TEST_CASE("a bad object is named with its field") {
  struct Case {
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {"nodes: [{name: a, tunnelIP: 1.2.3}]", "c.yaml.nodes[0].tunnelIP"},
      {"nodes: [{name: a, podCIDR: 10.0.0.1/24}]", "host bits"},
      {"nodes: [{tunnelIP: 1.2.3.4}]", "c.yaml.nodes[0].name: is required"},
      {"nodes: [{name: a}, {name: a}]", "node a is listed twice"},
      {"nodes: [{name: a, colour: red}]", "c.yaml.nodes[0].colour: unknown field"},
      {"services: [{name: s, ports: [{port: 0}]}]", "c.yaml.services[0].ports[0].port"},
      {"services: [{name: s, ports: [{port: 80, protocol: ICMP}]}]", "protocol: must be TCP, UDP or SCTP"},
      {"services: [{name: s, type: Magic}]", "type: must be ClusterIP"},
      {"endpointSlices: [{name: e, service: s, endpoints: [{addresses: [nope]}]}]", "endpoints[0].addresses"},
      {"nodez: []", "c.yaml.nodez: unknown field"},
      {"nodes: [1, 2", "not valid YAML"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto r = parseClusterFile(c.text, "c.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(c.expect));
  }
}

TEST_CASE("reloads deliver differences only; a bad file keeps the last good state") {
  TempDir dir;
  const std::string path = dir / "cluster.yaml";
  write(path, kCluster);
  FileClusterSource src(path, std::chrono::milliseconds(10));
  RecordingListener l;
  REQUIRE(src.start(l).ok());
  src.stop();  // drive it by hand from here
  src.pollOnce();
  // start() may have loaded already; either way the first load delivered everything once.
  CHECK(l.syncs == 1);
  CHECK(l.events.size() == 6);
  CHECK(src.stats().synced);
  // Counted by kind for the metrics: 2 nodes, 1 pod, 1 service, 1 slice, no
  // policy, and the namespace "default" they are in.
  CHECK(src.stats().events_by_kind == std::array<uint64_t, kObjectKindCount>{2, 1, 1, 1, 0, 1});
  l.events.clear();

  src.pollOnce();  // nothing changed: nothing delivered
  CHECK(l.events.empty());

  std::string changed = kCluster;
  changed += "  - {name: web-2, nodeName: node-b}\n";
  write(path, changed);
  src.pollOnce();
  CHECK(l.events == std::vector<std::string>{"+pod:default/web-2"});
  CHECK(l.syncs == 2);

  l.events.clear();
  write(path, "nodes: [{name: node-a, tunnelIP: not-an-ip}]\n");
  src.pollOnce();
  CHECK(l.events.empty());
  CHECK(l.syncs == 2);
  CHECK_THAT(src.stats().last_error, Catch::Contains("tunnelIP"));
  CHECK_THAT(src.stats().last_error, Catch::Contains("keeping the last good state"));
  CHECK(src.stats().malformed == 1);

  write(path, "nodes: [{name: node-a, tunnelIP: 192.168.50.1, podCIDR: 10.244.1.0/24, labels: {zone: a}}]\n");
  src.pollOnce();
  CHECK(l.events == std::vector<std::string>{"-node:node-b", "-ns:default", "-pod:default/web-1", "-pod:default/web-2",
                                             "-svc:default/web", "-eps:default/web-1"});
  CHECK(src.stats().last_error.empty());
}

namespace {

// Writes in place, as `cp` and `cat >` do: truncate, then the bytes, same inode.
void writeInPlace(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  REQUIRE(out.good());
}

// Sets a file's mtime `age` before now (negative: in the future).
void age(const std::string& path, std::chrono::seconds age) {
  auto t = std::chrono::system_clock::now() - age;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  timespec times[2] = {{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("a file written in place is read once it is still, never half written") {
  TempDir dir;
  const std::string path = dir / "cluster.yaml";
  writeInPlace(path, kCluster);
  age(path, std::chrono::seconds(10));
  // A settle long enough that no stall of this machine can pass it by.
  FileClusterSource src(path, std::chrono::milliseconds(10), std::chrono::seconds(60));
  RecordingListener l;
  REQUIRE(src.start(l).ok());
  src.stop();
  src.pollOnce();
  REQUIRE(l.events.size() == 6);  // the first read does not wait
  l.events.clear();

  // The writer has truncated the file and written half of it: an empty
  // cluster, then one node, each a valid file. Neither is read.
  writeInPlace(path, "");
  src.pollOnce();
  std::string changed = kCluster;
  changed += "  - {name: web-2, nodeName: node-b}\n";
  writeInPlace(path, changed.substr(0, changed.find("  - {name: node-b")));
  src.pollOnce();
  CHECK(l.events.empty());
  CHECK(l.syncs == 1);

  // Written out and still (its mtime is old): read, with only the difference.
  writeInPlace(path, changed);
  src.pollOnce();
  CHECK(l.events.empty());
  age(path, std::chrono::seconds(61));
  src.pollOnce();
  CHECK(l.events == std::vector<std::string>{"+pod:default/web-2"});
  CHECK(l.syncs == 2);

  // A file replaced by rename is read at once, however fresh.
  l.events.clear();
  write(path, kCluster);
  src.pollOnce();
  CHECK(l.events == std::vector<std::string>{"-pod:default/web-2"});
}

TEST_CASE("a file written in place with an mtime in the future is read once it has stayed the same") {
  TempDir dir;
  const std::string path = dir / "cluster.yaml";
  write(path, kCluster);
  FileClusterSource src(path, std::chrono::milliseconds(10), std::chrono::milliseconds(50));
  RecordingListener l;
  REQUIRE(src.start(l).ok());
  src.stop();
  src.pollOnce();
  REQUIRE(l.events.size() == 6);
  l.events.clear();

  std::string changed = kCluster;
  changed += "  - {name: web-2, nodeName: node-b}\n";
  writeInPlace(path, changed);
  age(path, -std::chrono::seconds(3600));  // a clock stepped back after the write
  src.pollOnce();
  CHECK(l.events.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  src.pollOnce();
  CHECK(l.events == std::vector<std::string>{"+pod:default/web-2"});
}

TEST_CASE("publishSelf writes a per-node file the other agents read") {
  TempDir dir;
  const std::string path = dir / "cluster.yaml";
  write(path, "nodes: [{name: node-a, podCIDR: 10.244.1.0/24}]\n");
  FileClusterSource a(path), b(path);
  a.setPublishedPodCidrs({"10.244.1.0/24"});
  b.setPublishedPodCidrs({"10.244.2.0/24"});
  SelfEntry keyed{"node-a", "192.168.50.1", "KA"};
  keyed.ipsec_epoch = 2;
  keyed.ipsec_mode = "keys";
  keyed.ipsec_nat_address = "198.51.100.7";  // behind a NAT
  REQUIRE(a.publishSelf(keyed).ok());
  CHECK(dpu::readFile(dir / "cluster.yaml.d/node-a.json")->find("\"ipsecNatAddress\": \"198.51.100.7\"") !=
        std::string::npos);
  CHECK(dpu::readFile(dir / "cluster.yaml.d/node-a.json")->find("\"ipsecEpoch\": 2") != std::string::npos);
  CHECK(dpu::readFile(dir / "cluster.yaml.d/node-a.json")->find("\"ipsecMode\": \"keys\"") != std::string::npos);
  REQUIRE(b.publishSelf(SelfEntry{"node-b", "192.168.50.2", ""}).ok());
  CHECK(dpu::fileExists(dir / "cluster.yaml.d/node-a.json"));
  CHECK_FALSE(a.publishSelf(SelfEntry{"../x", "1.2.3.4", ""}).ok());

  FileClusterSource reader(path);
  RecordingListener l;
  REQUIRE(reader.start(l).ok());
  reader.stop();
  reader.pollOnce();
  REQUIRE(l.nodes.size() == 2);
  for (const auto& n : l.nodes) {
    if (n.name == "node-a") {
      CHECK(n.tunnel_ip == "192.168.50.1");
      CHECK(n.ipsec_public_key == "KA");
      CHECK(n.ipsec_epoch == 2);
      CHECK(n.ipsec_mode == "keys");
      CHECK(n.ipsec_nat_address == "198.51.100.7");
      CHECK(n.pod_cidrs == std::vector<std::string>{"10.244.1.0/24"});
    } else {
      CHECK(n.name == "node-b");
      CHECK(n.ipsec_nat_address.empty());
      CHECK(n.pod_cidrs == std::vector<std::string>{"10.244.2.0/24"});
    }
  }
  // A broken publish file keeps that node's last good entry.
  l.events.clear();
  write(dir / "cluster.yaml.d/node-b.json", "{\"name\": ");
  reader.pollOnce();
  CHECK(l.events.empty());
  CHECK_THAT(reader.stats().last_error, Catch::Contains("node-b.json"));
  CHECK(reader.stats().malformed == 1);
}

TEST_CASE("port keys: published with the node, replacing the main file's, checked") {
  TempDir dir;
  const std::string path = dir / "cluster.yaml";
  write(path, "nodes: [{name: node-a, podCIDR: 10.244.1.0/24, portKeys: {10.244.1.9: 9}}]\n");
  FileClusterSource reader(path);
  RecordingListener l;
  REQUIRE(reader.start(l).ok());
  reader.stop();
  reader.pollOnce();
  REQUIRE(l.nodes.size() == 1);
  CHECK(l.nodes[0].port_keys == std::map<std::string, uint32_t>{{"10.244.1.9", 9}});

  FileClusterSource a(path);
  REQUIRE(a.publishSelf(SelfEntry{"node-a", "192.168.50.1", "", {{"10.244.1.3", 1}, {"fd00::3", 1}}}).ok());
  auto text = dpu::readFile(dir / "cluster.yaml.d/node-a.json");
  REQUIRE(text.ok());
  CHECK_THAT(*text, Catch::Contains("\"portKeys\""));
  l.nodes.clear();
  reader.pollOnce();
  REQUIRE(l.nodes.size() == 1);
  CHECK(l.nodes[0].port_keys == std::map<std::string, uint32_t>{{"10.244.1.3", 1}, {"fd00::3", 1}});
  // The last pod goes: an empty list is published, not the old one kept.
  REQUIRE(a.publishSelf(SelfEntry{"node-a", "192.168.50.1", "", {}}).ok());
  l.nodes.clear();
  reader.pollOnce();
  REQUIRE(l.nodes.size() == 1);
  CHECK(l.nodes[0].port_keys.empty());

  for (const char* bad : {"portKeys: [1]", "portKeys: {x: 1}", "portKeys: {10.0.0.1: 0}", "portKeys: {10.0.0.1: 40000}"}) {
    INFO(bad);
    auto r = parseClusterFile(std::string("nodes: [{name: n, ") + bad + "}]\n", "c.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("portKeys"));
  }
}

TEST_CASE("a missing cluster file fails start() with what to do") {
  TempDir dir;
  FileClusterSource src(dir / "none.yaml");
  RecordingListener l;
  auto r = src.start(l);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("does not exist"));
}

TEST_CASE("the example configuration and cluster file stay valid") {
  const std::string dir = std::string(DPU_SOURCE_DIR) + "/dpu-agent/control/examples/";
  auto text = dpu::readFile(dir + "cluster.yaml");
  REQUIRE(text.ok());
  auto snap = parseClusterFile(*text, "cluster.yaml");
  INFO((snap.ok() ? std::string() : snap.error()));
  REQUIRE(snap.ok());
  CHECK(snap->nodes.size() == 2);
  // It shows every kind and the fields the comments describe.
  CHECK(snap->namespaces.size() == 2);
  CHECK(snap->namespaces.at("shop").labels.at("kubernetes.io/metadata.name") == "shop");
  CHECK(snap->pods.at("shop/web-1").ports.size() == 2);
  const ServiceInfo& web = snap->services.at("shop/web");
  CHECK(web.type == ServiceType::kNodePort);
  CHECK(web.ports.at(0).target_port == PortRef{0, "http"});
  CHECK(web.affinity_timeout_seconds == 600);
  CHECK(web.external_traffic_policy == TrafficPolicy::kLocal);
  CHECK(web.load_balancer_ips == std::vector<std::string>{"203.0.113.7"});
  CHECK(snap->services.at("shop/db").headless);
  CHECK(snap->slices.at("shop/web-abc12").endpoints.at(1).terminating);
  const NetworkPolicyInfo& np = snap->policies.at("shop/web-ingress");
  CHECK(np.ingress.at(0).peers.size() == 4);
  CHECK(np.ingress.at(0).ports.at(1).end_port == 9010);
  CHECK(np.egress.size() == 1);
  CHECK(snap->policies.at("tools/default-deny").policy_ingress);
  auto cfg = loadAgentConfig(dir + "agent.yaml");
  INFO((cfg.ok() ? std::string() : cfg.error()));
  REQUIRE(cfg.ok());
  CHECK(cfg->pod_mtu == 1442);
}

TEST_CASE("random mutations of a cluster file are refused or parsed, never a crash") {
  std::mt19937 rng(777);
  const std::string seed = kCluster;
  int parsed = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text = seed;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) {
      size_t pos = rng() % text.size();
      if (rng() % 2) text[pos] = "{}[]:,- \n\"'x0.#&*!|>"[rng() % 21];
      else text.erase(pos, 1 + rng() % 8);
    }
    auto r = parseClusterFile(text, "fuzz.yaml");
    parsed += r.ok();
    if (!r.ok()) CHECK_FALSE(r.error().empty());
  }
  CHECK(parsed < 1500);
}
