// dpuctl's output formats on canned operator replies.
#include <catch2/catch.hpp>

#include "dpuctl_format.h"

using namespace dpu::dpuctl;

TEST_CASE("dpuctl: durations", "[dpuctl]") {
  CHECK(formatDuration(0) == "0ms");
  CHECK(formatDuration(250) == "250ms");
  CHECK(formatDuration(1500) == "1.5s");
  CHECK(formatDuration(123000) == "2m03s");
  CHECK(formatDuration(3720000) == "1h02m");
}

TEST_CASE("dpuctl: dump-flows, one line per flow with where it runs", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  auto* f = reply.add_flows();
  f->set_match("in_port=1,ipv4,nw_src=10.244.1.5,nw_dst=10.244.2.7");
  f->set_actions("dec_ttl,geneve_encap(vni=1,remote=192.168.100.2),output:0");
  f->set_packets(10);
  f->set_bytes(980);
  f->set_age_ms(1500);
  f->set_idle_ms(20);
  f->set_in_hw(false);
  f->set_offload_status("software: offload disabled");
  auto* g = reply.add_flows();
  g->set_match("in_port=0");
  g->set_actions("output:1");
  g->set_in_hw(true);
  g->set_offload_status("offloaded");
  CHECK(formatFlows(reply) ==
        "in_port=1,ipv4,nw_src=10.244.1.5,nw_dst=10.244.2.7, packets:10, bytes:980, age:1.5s, used:20ms ago, "
        "dp:sw(offload disabled), actions:dec_ttl,geneve_encap(vni=1,remote=192.168.100.2),output:0\n"
        "in_port=0, packets:0, bytes:0, age:0ms, used:0ms ago, dp:hw, actions:output:1\n");
}

TEST_CASE("dpuctl: ports and stats tables, JSON", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  auto* p = reply.add_ports();
  p->set_name("pf0vf1");
  p->set_role("representor");
  p->set_dpdk_port(2);
  p->set_rx_packets(5);
  p->set_state("up");
  p->set_devargs("net_af_xdp_pf0vf1,iface=pf0vf1");
  auto* c = reply.add_counters();
  c->set_name("port_security");
  c->set_value(3);
  c->set_description("spoofed source");
  auto* z = reply.add_counters();
  z->set_name("ttl_expired");
  std::string ports = formatPorts(reply);
  CHECK_THAT(ports, Catch::StartsWith("PORT  NAME    ROLE         STATE  RX  TX  RX_DROP  TX_DROP  LOGICAL  DEVARGS\n"));
  CHECK_THAT(ports, Catch::Contains("2     pf0vf1  representor  up     5   0   0        0        -        net_af_xdp_pf0vf1"));
  CHECK(formatStats(reply, true) == "COUNTER        VALUE  DESCRIPTION\nport_security  3      spoofed source\n");
  CHECK_THAT(formatStats(reply, false), Catch::Contains("ttl_expired"));
  CHECK_THAT(formatJson(reply), Catch::Contains("\"name\": \"pf0vf1\""));
}
