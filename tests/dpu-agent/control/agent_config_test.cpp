// dpu-agent configuration: a good config reads whole, and each bad field stops
// the start with a message that names it.
#include <catch2/catch.hpp>

#include <functional>

#include "common/config_doc.h"
#include "control/agent.h"
#include "control/agent_config.h"
#include "control/logical_model.h"
#include "control_test_util.h"
#include "model/model.h"

using namespace dpu::control;
using dpu::control::testing::baseConfig;

namespace {

std::string errorOf(nlohmann::json doc) {
  auto c = parseAgentConfig(doc);
  return c ? std::string("OK") : c.error();
}

}  // namespace

TEST_CASE("a YAML config reads into every field") {
  auto doc = dpu::parseConfigText(R"(
nodeName: node-a
tunnelIP: 192.168.50.1
uplink: p0
representors:
  - {pf: 0, vfCount: 16, name: "pf0vf{vf}"}
  - {pf: 1, names: [rep-a, rep-b]}
podCIDR: 10.244.1.0/24
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
underlayMTU: 9000
ipsec: false
clusterSource: {type: file, path: /etc/dpu/cluster.yaml}
api: {address: 192.168.100.2, port: 8443, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}}
metrics: {listen: "[fd00::5]:9444"}
dataplaneSocket: /run/dpu/dp.sock
stateDir: /var/lib/x
log: {level: debug}
)", "t");
  REQUIRE(doc.ok());
  auto c = parseAgentConfig(*doc);
  REQUIRE(c.ok());
  CHECK(c->node_name == "node-a");
  CHECK(c->tunnel_ip.str() == "192.168.50.1");
  REQUIRE(c->representors.size() == 2);
  CHECK(c->representorsOf(0)->representorFor(7) == "pf0vf7");
  CHECK(c->representorsOf(1)->vf_count == 2);
  CHECK(c->representorsOf(1)->representorFor(1) == "rep-b");
  CHECK(c->representorsOf(2) == nullptr);
  CHECK(c->pod_cidrs.at(0).str() == "10.244.1.0/24");
  CHECK_FALSE(c->ipsec.enabled());
  CHECK(c->pod_mtu == podMtu(9000, false, false));
  CHECK(c->apiUri() == "https://192.168.100.2:8443");
  CHECK(c->tls.client_ca_file == "/ca.pem");
  // The metrics listener uses the API's TLS settings.
  CHECK(c->metricsUri() == "https://[fd00::5]:9444");
  CHECK(c->checkpointPath() == "/var/lib/x/agent-checkpoint.pb");
}

TEST_CASE("the pod MTU follows the underlay, the tunnel family and IPsec") {
  CHECK(podMtu(1500, false, false) == 1442);  // IPv4 + UDP + Geneve + OVN option + inner Ethernet
  CHECK(podMtu(1500, true, false) == 1422);
  CHECK(podMtu(1500, false, true) == 1408);
  auto c = parseAgentConfig(baseConfig("/tmp/x"));
  REQUIRE(c.ok());
  CHECK(c->pod_mtu == 1442);
  CHECK(c->apiUri() == "http://127.0.0.1:9443");
  CHECK_FALSE(c->metrics.enabled);
  CHECK(c->metricsUri().empty());
}

TEST_CASE("each bad field is named") {
  auto base = baseConfig("/tmp/x");
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j.erase("nodeName"); }, "config.nodeName: is required"},
      {[](auto& j) { j["tunnelIP"] = "192.168.50"; }, "config.tunnelIP"},
      {[](auto& j) { j["representors"][0]["vfCount"] = 0; }, "config.representors[0].vfCount: must be between 1 and 1024"},
      {[](auto& j) { j["representors"][0]["name"] = "pf0"; }, "config.representors[0].name: must contain {vf}"},
      {[](auto& j) { j["representors"][0]["color"] = "red"; }, "config.representors[0].color: unknown field"},
      {[](auto& j) { j["representors"] = nlohmann::json::array(); }, "config.representors: must list at least one PF"},
      {[](auto& j) { j["podCIDR"] = "10.245.1.0/24"; }, "is not inside any of clusterCIDRs"},
      {[](auto& j) { j["podCIDR"] = "10.244.1.1/24"; }, "has host bits set"},
      {[](auto& j) { j["underlayMTU"] = 100; }, "config.underlayMTU: must be between 576 and 9216"},
      {[](auto& j) { j["underlayMTU"] = "1500"; }, "config.underlayMTU: must be an integer"},
      {[](auto& j) { j["ipsec"] = "yes"; }, "config.ipsec: must be true or false"},
      {[](auto& j) { j["clusterSource"]["type"] = "etcd"; }, "config.clusterSource.type: must be \"file\" or \"kubernetes\""},
      {[](auto& j) { j["clusterSource"] = {{"type", "kubernetes"}}; }, "config.clusterSource.kubernetes: give exactly one of kubeconfig"},
      {[](auto& j) { j["api"] = {{"tls", {{"cert", "/c.pem"}}}}; }, "config.api.tls.cert: cert and key go together"},
      {[](auto& j) { j["api"] = {{"port", 70000}}; }, "config.api.port"},
      {[](auto& j) { j["api"] = {{"address", "localhost"}}; }, "config.api.address"},
      {[](auto& j) { j["log"] = {{"level", "loud"}}; }, "config.log.level"},
      {[](auto& j) { j["metrics"] = {{"listen", "9444"}}; }, "config.metrics.listen: must be \"ADDRESS:PORT\""},
      {[](auto& j) { j["metrics"] = {{"listen", "node-a:9444"}}; }, "config.metrics.listen: \"node-a\" is not a numeric IP"},
      {[](auto& j) { j["metrics"] = {{"listen", "10.0.0.1:0"}}; }, "config.metrics.listen: the port \"0\" must be 1..65535"},
      {[](auto& j) { j["metrics"] = {{"listen", "fd00::5:9444"}}; }, "IPv6 in brackets"},
      {[](auto& j) { j["metrics"] = {{"listen", "127.0.0.1:9443"}}; }, "is the attach API's own address and port"},
      {[](auto& j) { j["metrics"] = {{"port", 9444}}; }, "config.metrics.port: unknown field"},
      {[](auto& j) { j["podCIDRs"] = {"10.244.2.0/24"}; }, "config.podCIDR: give either podCIDR or podCIDRs"},
      {[](auto& j) { j["tunnelIp"] = "1.2.3.4"; }, "config.tunnelIp: unknown field"},
      {[](auto& j) { j["clusterCIDRs"] = nlohmann::json::array(); }, "config.clusterCIDRs: must list"},
  };
  for (auto& c : cases) {
    auto j = base;
    c.edit(j);
    INFO(j.dump());
    CHECK_THAT(errorOf(j), Catch::Contains(c.expect));
  }
}

TEST_CASE("the attach API off this host is mutual TLS unless insecure says otherwise") {
  auto base = baseConfig("/tmp/x");
  auto with = [&](nlohmann::json api) {
    auto j = base;
    j["api"] = std::move(api);
    return errorOf(j);
  };
  // Plain HTTP on the host-DPU link: refused, naming both remedies.
  CHECK_THAT(with({{"address", "169.254.0.2"}}),
             Catch::Contains("config.api.tls: the attach API on 169.254.0.2 would be plain HTTP") &&
                 Catch::Contains("make-tls.sh") && Catch::Contains("insecure: true"));
  // TLS that takes any client: refused too.
  CHECK_THAT(with({{"address", "169.254.0.2"}, {"tls", {{"cert", "/c.pem"}, {"key", "/k.pem"}}}}),
             Catch::Contains("config.api.tls.clientCA: without it any client"));
  CHECK(with({{"address", "169.254.0.2"}, {"tls", {{"cert", "/c.pem"}, {"key", "/k.pem"}, {"clientCA", "/ca.pem"}}}}) ==
        "OK");
  // Said in so many words, or on loopback (nothing crosses the link): allowed.
  CHECK(with({{"address", "169.254.0.2"}, {"insecure", true}}) == "OK");
  CHECK(with({{"address", "127.0.0.1"}}) == "OK");
  CHECK(with({{"address", "::1"}}) == "OK");
  CHECK(with({{"address", "fd00::1"}, {"insecure", true}}) == "OK");
  CHECK_THAT(with({{"address", "fd00::1"}}), Catch::Contains("config.api.tls"));
  CHECK_THAT(with({{"address", "169.254.0.2"}, {"insecure", "yes"}}), Catch::Contains("config.api.insecure"));
  auto c = parseAgentConfig([&] {
    auto j = base;
    j["api"] = {{"address", "169.254.0.2"}, {"insecure", true}};
    return j;
  }());
  REQUIRE(c.ok());
  CHECK(c->api_insecure);
}

TEST_CASE("a config file that does not parse names the file") {
  dpu::control::testing::TempDir dir;
  auto r = loadAgentConfig(dir / "missing.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("missing.yaml"));
}

TEST_CASE("ipsec: false, an object with its mode and settings, and encryption refused until the dataplane encrypts") {
  auto base = baseConfig("/tmp/x");
  auto with = [&](nlohmann::json ipsec) {
    auto j = base;
    j["ipsec"] = std::move(ipsec);
    return j;
  };
  auto off = parseAgentConfig(with(false));
  REQUIRE(off.ok());
  CHECK(off->ipsec.mode == IpsecMode::kOff);
  CHECK(off->pod_mtu == 1442);

  auto keys = parseAgentConfig(with({{"mode", "keys"}}));
  REQUIRE(keys.ok());
  CHECK(keys->ipsec.mode == IpsecMode::kKeys);
  CHECK(keys->ipsec.enabled());
  CHECK_FALSE(keys->ipsec.encrypt());
  // Keys mode prepares for encryption: pods already get the ESP MTU.
  CHECK(keys->pod_mtu == 1408);
  CHECK(keys->ipsec.state_dir == "/tmp/x/ipsec");
  CHECK(keys->ipsec.key_bits == 128);
  CHECK(keys->ipsec.grace_period_s == 60);
  CHECK(keys->ipsec.rotation_period_s == 86400);
  CHECK(keys->ipsec.esn_soft_limit == uint64_t{1} << 63);

  auto full = parseAgentConfig(with({{"mode", "keys"}, {"stateDir", "/var/lib/k"}, {"pskFile", "/etc/psk"},
                                     {"keyBits", 256}, {"rotationPeriodSeconds", 3600}, {"gracePeriodSeconds", 30},
                                     {"esnSoftLimit", 1000000}, {"byteSoftLimit", 1 << 30}, {"replayWindow", 4096},
                                     {"rollout", true}}));
  REQUIRE(full.ok());
  CHECK(full->ipsec.rollout);
  CHECK_FALSE(keys->ipsec.rollout);  // fail closed unless asked
  CHECK(full->ipsec.state_dir == "/var/lib/k");
  CHECK(full->ipsec.psk_file == "/etc/psk");
  CHECK(full->ipsec.key_bits == 256);
  CHECK(full->ipsec.rotation_period_s == 3600);
  CHECK(full->ipsec.grace_period_s == 30);
  CHECK(full->ipsec.esn_soft_limit == 1000000);
  CHECK(full->ipsec.byte_soft_limit == 1u << 30);
  CHECK(full->ipsec.replay_window == 4096);

  // Encryption on: `mode: on`, or `ipsec: true` with every default; the
  // dataplane is told to encrypt (NodeSettings.ipsec).
  for (const nlohmann::json& on : {nlohmann::json{{"mode", "on"}}, nlohmann::json(true)}) {
    INFO(on.dump());
    auto enc = parseAgentConfig(with(on));
    INFO((enc ? std::string() : enc.error()));
    REQUIRE(enc.ok());
    CHECK(enc->ipsec.encrypt());
    CHECK(enc->pod_mtu == 1408);
    CHECK(enc->ipsec.state_dir == "/tmp/x/ipsec");
    dpu::control::ModelState model;
    Agent agent(*enc, model, false);
    CHECK(model.snapshot().node().ipsec());
  }
  auto keys_only = parseAgentConfig(with({{"mode", "keys"}}));
  REQUIRE(keys_only.ok());
  {
    dpu::control::ModelState model;
    Agent agent(*keys_only, model, false);
    CHECK_FALSE(model.snapshot().node().ipsec());
  }

  struct Case {
    nlohmann::json ipsec;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"mode", "maybe"}}, "config.ipsec.mode: must be off, keys or on, not \"maybe\""},
      {{{"mode", "keys"}, {"keyBits", 192}}, "config.ipsec.keyBits: must be 128 (AES-128-GCM) or 256"},
      {{{"mode", "keys"}, {"gracePeriodSeconds", 0}}, "config.ipsec.gracePeriodSeconds: must be between 1 and 86400"},
      {{{"mode", "keys"}, {"gracePeriodSeconds", 60}, {"rotationPeriodSeconds", 100}},
       "config.ipsec.rotationPeriodSeconds: 100 is shorter than twice gracePeriodSeconds (60)"},
      {{{"mode", "keys"}, {"esnSoftLimit", 10}}, "config.ipsec.esnSoftLimit: must be between 65536"},
      {{{"mode", "keys"}, {"byteSoftLimit", 1000}}, "config.ipsec.byteSoftLimit: must be 0 (none) or at least"},
      {{{"mode", "keys"}, {"replayWindow", 100}}, "config.ipsec.replayWindow: must be a multiple of 64"},
      {{{"mode", "keys"}, {"psk", "x"}}, "config.ipsec.psk: unknown field"},
      {{{"mode", "on"}, {"rollout", "yes"}}, "config.ipsec.rollout: must be true or false"},
      {"yes", "config.ipsec: must be true or false"},
  };
  for (const auto& c : cases) {
    INFO(c.ipsec.dump());
    CHECK_THAT(errorOf(with(c.ipsec)), Catch::Contains(c.expect));
  }
}

TEST_CASE("ipsec.natTraversal: ESP in UDP 4500, 8 bytes off the pod MTU, told to the dataplane; IPv4 only") {
  auto with = [](nlohmann::json ipsec, const char* tunnel_ip = nullptr) {
    auto j = baseConfig("/tmp/x");
    j["ipsec"] = std::move(ipsec);
    if (tunnel_ip != nullptr) j["tunnelIP"] = tunnel_ip;
    return j;
  };
  CHECK(podMtu(1500, false, true, true) == 1400);
  CHECK(podMtu(1500, false, false, true) == 1442);  // no ESP, no NAT-T header
  CHECK(podMtu(9000, false, true, true) == podMtu(9000, false, true) - 8);

  auto plain = parseAgentConfig(with({{"mode", "on"}}));
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->ipsec.nat_traversal);  // off unless asked
  for (const char* mode : {"keys", "on"}) {
    INFO(mode);
    auto c = parseAgentConfig(with({{"mode", mode}, {"natTraversal", true}}));
    INFO((c ? std::string() : c.error()));
    REQUIRE(c.ok());
    CHECK(c->ipsec.nat_traversal);
    CHECK(c->pod_mtu == 1400);
    dpu::control::ModelState model;
    Agent agent(*c, model, false);
    const auto node = model.snapshot().node();
    CHECK(node.ipsec_nat_traversal());
    CHECK(node.pod_mtu() == 1400);
    CHECK(dpu::model::validateNodeSettings(node).ok());
  }
  CHECK_THAT(errorOf(with({{"mode", "off"}, {"natTraversal", true}})),
             Catch::Contains("config.ipsec.natTraversal: is set with mode off"));
  CHECK_THAT(errorOf(with({{"mode", "on"}, {"natTraversal", "yes"}})),
             Catch::Contains("config.ipsec.natTraversal: must be true or false"));
  CHECK_THAT(errorOf(with({{"mode", "on"}, {"natTraversal", true}}, "fd00:50::1")),
             Catch::Contains("config.ipsec.natTraversal: is for IPv4 underlays"));
}

TEST_CASE("ipsec.natAddress and natKeepaliveSeconds: a node behind a NAT says where it is reached; validated") {
  auto with = [](nlohmann::json ipsec) {
    auto j = baseConfig("/tmp/x");
    j["ipsec"] = std::move(ipsec);
    return j;
  };
  auto c = parseAgentConfig(with({{"mode", "on"}, {"natTraversal", true}, {"natAddress", "198.51.100.7"}}));
  INFO((c ? std::string() : c.error()));
  REQUIRE(c.ok());
  REQUIRE(c->ipsec.nat_address);
  CHECK(c->ipsec.nat_address->str() == "198.51.100.7");
  CHECK(c->ipsec.nat_keepalive_s == 20);  // the default with NAT traversal
  {
    dpu::control::ModelState model;
    Agent agent(*c, model, false);
    const auto node = model.snapshot().node();
    CHECK(node.ipsec_nat_keepalive_seconds() == 20);
    CHECK(dpu::model::validateNodeSettings(node).ok());
  }
  auto quiet = parseAgentConfig(with({{"mode", "keys"}, {"natTraversal", true}, {"natKeepaliveSeconds", 0}}));
  REQUIRE(quiet.ok());
  CHECK(quiet->ipsec.nat_keepalive_s == 0);
  CHECK_FALSE(quiet->ipsec.nat_address);
  auto plain = parseAgentConfig(with({{"mode", "on"}}));
  REQUIRE(plain.ok());
  CHECK(plain->ipsec.nat_keepalive_s == 0);  // nothing to keep alive without NAT traversal

  const std::vector<std::pair<nlohmann::json, const char*>> bad = {
      {{{"mode", "on"}, {"natAddress", "198.51.100.7"}},
       "config.ipsec.natAddress: is set without natTraversal: a NAT passes only ESP in UDP 4500"},
      {{{"mode", "on"}, {"natTraversal", true}, {"natAddress", "198.51.100"}}, "config.ipsec.natAddress: \"198.51.100\""},
      {{{"mode", "on"}, {"natTraversal", true}, {"natAddress", "2001:db8::7"}},
       "config.ipsec.natAddress: 2001:db8::7 is IPv6"},
      {{{"mode", "on"}, {"natTraversal", true}, {"natAddress", "224.0.0.7"}},
       "config.ipsec.natAddress: 224.0.0.7 is not a unicast address"},
      {{{"mode", "on"}, {"natTraversal", true}, {"natAddress", "0.0.0.0"}},
       "config.ipsec.natAddress: 0.0.0.0 is not a unicast address"},
      {{{"mode", "on"}, {"natTraversal", true}, {"natAddress", "192.168.50.1"}},
       "config.ipsec.natAddress: 192.168.50.1 is the tunnelIP"},
      {{{"mode", "on"}, {"natTraversal", true}, {"natKeepaliveSeconds", 3601}}, "config.ipsec.natKeepaliveSeconds"},
      {{{"mode", "on"}, {"natKeepaliveSeconds", 20}},
       "config.ipsec.natKeepaliveSeconds: is set without natTraversal"},
  };
  for (const auto& [ipsec, want] : bad) {
    INFO(ipsec.dump());
    CHECK_THAT(errorOf(with(ipsec)), Catch::Contains(want));
  }
}

TEST_CASE("northSouth: the node's addresses and gateways reach the dataplane's node settings") {
  auto j = baseConfig("/tmp/x");
  j["northSouth"] = {{"nodeIPs", {"172.18.0.1/24", "2001:db8:18::1/64"}}, {"gateways", {"172.18.0.254"}}};
  auto c = parseAgentConfig(j);
  INFO((c ? std::string() : c.error()));
  REQUIRE(c.ok());
  REQUIRE(c->node_ips.size() == 2);
  CHECK(c->node_ips[0].str() == "172.18.0.1/24");
  CHECK(c->node_ips[1].str() == "2001:db8:18::1/64");
  REQUIRE(c->node_gateways.size() == 1);
  CHECK(c->node_gateways[0].str() == "172.18.0.254");
  // The agent hands them to the dataplane in its node settings, as the model library reads them.
  dpu::control::ModelState model;
  Agent agent(*c, model, false);
  const auto node = model.snapshot().node();
  REQUIRE(node.node_ips_size() == 2);
  CHECK(node.node_ips(0) == "172.18.0.1/24");
  CHECK(node.node_gateways(0) == "172.18.0.254");
  CHECK(dpu::model::validateNodeSettings(node).ok());
  // Absent: no node IP, nothing refused.
  auto none = parseAgentConfig(baseConfig("/tmp/x"));
  REQUIRE(none.ok());
  CHECK(none->node_ips.empty());
}

TEST_CASE("northSouth: a bad node address is named with the model's reason") {
  struct Case {
    nlohmann::json section;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"nodeIPs", {"172.18.0.1"}}}, "config.northSouth.nodeIPs \"172.18.0.1\": "},
      {{{"nodeIPs", {"172.18.0.0/24"}}}, "is the network address of 172.18.0.0/24"},
      {{{"nodeIPs", {"192.168.50.1/24"}}}, "is the tunnel IP"},
      {{{"nodeIPs", {"10.244.9.9/24"}}}, "is inside the cluster CIDR 10.244.0.0/16"},
      {{{"nodeIPs", {"10.100.0.1/24"}}}, "is inside the service CIDR 10.96.0.0/12"},
      {{{"nodeIPs", {"172.18.0.1/24"}}, {"gateways", {"172.19.0.1"}}},
       "config.northSouth.gateways \"172.19.0.1\" is in none of the node IPs' prefixes"},
      {{{"gateways", {"172.18.0.254"}}}, "no node IP of its family"},
      {{{"nodeIPs", "172.18.0.1/24"}}, "config.northSouth.nodeIPs: must be a list"},
      {{{"nodeIP", {"172.18.0.1/24"}}}, "config.northSouth.nodeIP: unknown field"},
  };
  for (const auto& c : cases) {
    auto j = baseConfig("/tmp/x");
    j["northSouth"] = c.section;
    INFO(j.dump());
    CHECK_THAT(errorOf(j), Catch::Contains(c.expect));
  }
}
