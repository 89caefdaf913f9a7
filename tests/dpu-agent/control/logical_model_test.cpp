// The logical model: datapath keys every node agrees on, and change tracking
// that turns one changed object into one entry of one Delta.
#include <catch2/catch.hpp>

#include "control/logical_model.h"

using namespace dpu::control;
using dpu::IpPrefix;

namespace {

dpv1::LogicalPort port(const std::string& name, uint32_t key, const std::string& ip) {
  dpv1::LogicalPort p;
  p.set_name(name);
  p.set_key(key);
  p.set_kind(dpv1::POD);
  p.set_representor("pf0vf" + std::to_string(key));
  p.set_mac("0a:58:0a:f4:01:0" + std::to_string(key));
  p.add_ips(ip);
  p.set_datapath_key(2);
  return p;
}

dpv1::RemoteNode remote(const std::string& name, const std::string& tip, const std::string& cidr) {
  dpv1::RemoteNode r;
  r.set_name(name);
  r.set_tunnel_ip(tip);
  auto* s = r.add_subnets();
  s->set_cidr(cidr);
  s->set_datapath_key(datapathKeyFor(*IpPrefix::parse(cidr), {*IpPrefix::parse("10.244.0.0/16")}));
  return r;
}

}  // namespace

TEST_CASE("datapath keys come from the subnet's place in the cluster CIDR") {
  std::vector<IpPrefix> cc = {*IpPrefix::parse("10.244.0.0/16"), *IpPrefix::parse("fd00:10:244::/48")};
  CHECK(datapathKeyFor(*IpPrefix::parse("10.244.0.0/24"), cc) == 1);
  CHECK(datapathKeyFor(*IpPrefix::parse("10.244.1.0/24"), cc) == 2);
  CHECK(datapathKeyFor(*IpPrefix::parse("10.244.255.0/24"), cc) == 256);
  CHECK(datapathKeyFor(*IpPrefix::parse("fd00:10:244:5::/64"), cc) == (1u << 20) + 6);
  uint32_t outside = datapathKeyFor(*IpPrefix::parse("172.16.0.0/24"), cc);
  CHECK(outside >= (1u << 23));
  CHECK(outside < (1u << 24));
  CHECK(outside == datapathKeyFor(*IpPrefix::parse("172.16.0.0/24"), cc));  // stable
}

TEST_CASE("an unchanged object is not a change") {
  ModelState m;
  m.upsertPort(port("a", 1, "10.244.1.3"));
  REQUIRE(m.takePending().has_value());
  m.upsertPort(port("a", 1, "10.244.1.3"));
  CHECK_FALSE(m.hasPending());
  m.deletePort("nope");
  CHECK_FALSE(m.hasPending());
}

TEST_CASE("one changed object is one entry in one Delta") {
  ModelState m;
  m.upsertPort(port("a", 1, "10.244.1.3"));
  m.upsertPort(port("b", 2, "10.244.1.4"));
  m.upsertRemoteNode(remote("node-b", "192.168.50.2", "10.244.2.0/24"));
  m.snapshotAndClear();

  m.upsertRemoteNode(remote("node-c", "192.168.50.3", "10.244.3.0/24"));
  auto p = m.takePending();
  REQUIRE(p.has_value());
  CHECK(p->changes == 1);
  REQUIRE(p->delta.upsert_remote_nodes_size() == 1);
  CHECK(p->delta.upsert_remote_nodes(0).name() == "node-c");
  CHECK(p->delta.upsert_ports_size() == 0);
  CHECK_FALSE(p->delta.has_node());

  m.deletePort("a");
  auto changed = port("b", 2, "10.244.1.4");
  changed.set_mac("0a:58:0a:f4:01:44");
  m.upsertPort(changed);
  m.deleteRemoteNode("node-b");
  p = m.takePending();
  REQUIRE(p.has_value());
  CHECK(p->changes == 3);
  CHECK(p->delta.delete_ports_size() == 1);
  CHECK(p->delta.delete_ports(0) == "a");
  CHECK(p->delta.upsert_ports(0).mac() == "0a:58:0a:f4:01:44");
  CHECK(p->delta.delete_remote_nodes(0) == "node-b");
  CHECK_FALSE(m.takePending().has_value());
}

TEST_CASE("unacknowledged changes: counted until the dataplane accepts the request that carried them") {
  ModelState m;
  CHECK(m.unacknowledgedChanges() == 0);
  m.upsertPort(port("a", 1, "10.244.1.3"));
  m.upsertPort(port("b", 2, "10.244.1.4"));
  uint64_t sequence = 0;
  m.snapshotAndClear(nullptr, &sequence);
  CHECK(m.unacknowledgedChanges() == 2);  // sent, not yet accepted
  m.upsertPort(port("a", 1, "10.244.1.3"));  // no change
  CHECK(m.unacknowledgedChanges() == 2);
  m.acknowledge(sequence);
  CHECK(m.unacknowledgedChanges() == 0);
  CHECK(m.portAcknowledged("a"));

  m.deletePort("b");
  auto p = m.takePending();
  REQUIRE(p.has_value());
  m.upsertRemoteNode(remote("node-b", "192.168.50.2", "10.244.2.0/24"));  // after the Delta was taken
  CHECK(m.unacknowledgedChanges() == 2);
  m.acknowledge(p->sequence);
  CHECK(m.unacknowledgedChanges() == 1);  // the later change is still on its way
  m.acknowledge(p->sequence - 1);  // an older answer moves nothing back
  CHECK(m.unacknowledgedChanges() == 1);

  m.forgetAcknowledged();  // a new dataplane instance: nothing it has is known
  CHECK(m.unacknowledgedChanges() == 4);
  CHECK_FALSE(m.portAcknowledged("a"));
}

TEST_CASE("a full sync carries everything and clears what was pending") {
  ModelState m;
  dpv1::NodeSettings n;
  n.set_name("node-a");
  m.setNode(n);
  m.upsertPort(port("a", 1, "10.244.1.3"));
  dpv1::Subnet s;
  s.set_cidr("10.244.1.0/24");
  m.upsertLocalSubnet(s);
  std::optional<ModelState::Clock::time_point> oldest;
  auto model = m.snapshotAndClear(&oldest);
  CHECK(oldest.has_value());
  CHECK(model.node().name() == "node-a");
  CHECK(model.ports_size() == 1);
  CHECK(model.local_subnets_size() == 1);
  CHECK_FALSE(m.hasPending());
  CHECK_FALSE(m.waitForChange(std::chrono::milliseconds(1)));
  m.setNode(n);  // the same settings: no change
  CHECK_FALSE(m.hasPending());
  n.set_pod_mtu(1400);
  m.setNode(n);
  auto p = m.takePending();
  REQUIRE(p.has_value());
  CHECK(p->delta.node().pod_mtu() == 1400);
}

TEST_CASE("IPsec SAs: a whole change (an outbound switch) is one Delta, and a full sync carries them") {
  ModelState m;
  auto sa = [](const std::string& name, uint32_t spi) {
    dpv1::IpsecSa a;
    a.set_name(name);
    a.set_remote_node("node-b");
    a.set_spi(spi);
    return a;
  };
  m.setIpsecSas({{"node-b/in/1", sa("node-b/in/1", 0x100)}, {"node-b/out/1", sa("node-b/out/1", 0x200)}});
  (void)m.takePending();
  m.setIpsecSas({{"node-b/in/1", sa("node-b/in/1", 0x100)}, {"node-b/out/2", sa("node-b/out/2", 0x300)}});
  auto p = m.takePending();
  REQUIRE(p);
  CHECK(p->changes == 2);
  REQUIRE(p->delta.delete_ipsec_sas_size() == 1);
  CHECK(p->delta.delete_ipsec_sas(0) == "node-b/out/1");
  REQUIRE(p->delta.upsert_ipsec_sas_size() == 1);
  CHECK(p->delta.upsert_ipsec_sas(0).name() == "node-b/out/2");
  m.setIpsecSas({{"node-b/in/1", sa("node-b/in/1", 0x100)}, {"node-b/out/2", sa("node-b/out/2", 0x300)}});
  CHECK_FALSE(m.hasPending());
  CHECK(m.snapshot().ipsec_sas_size() == 2);
  CHECK(m.ipsecSaCount() == 2);
}
