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

TEST_CASE("dpuctl: dump-flows shows an offloaded NAT flow whose close is punted to software", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  auto* f = reply.add_flows();
  f->set_match("in_port=2,tcp,tp_src=40000,tp_dst=80");
  f->set_actions("set_nw_dst:10.244.1.6,set_tp_dst:8080,output:3");
  f->set_in_hw(true);
  f->set_offload_status("offloaded+punt:fin,syn,rst");
  auto* g = reply.add_flows();  // the same flow refused: the reason, no punt
  g->set_match("in_port=2,tcp,tp_src=40001,tp_dst=80");
  g->set_actions("set_nw_dst:10.244.1.6,set_tp_dst:8080,output:3");
  g->set_in_hw(false);
  g->set_offload_status("software: close punt rule: out of steering memory");
  CHECK(formatFlows(reply) ==
        "in_port=2,tcp,tp_src=40000,tp_dst=80, packets:0, bytes:0, age:0ms, used:0ms ago, dp:hw+punt:fin,syn,rst, "
        "actions:set_nw_dst:10.244.1.6,set_tp_dst:8080,output:3\n"
        "in_port=2,tcp,tp_src=40001,tp_dst=80, packets:0, bytes:0, age:0ms, used:0ms ago, "
        "dp:sw(close punt rule: out of steering memory), actions:set_nw_dst:10.244.1.6,set_tp_dst:8080,output:3\n");
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
  p->set_backend("af_xdp");
  p->set_mbufs(3104);
  p->set_worker(0);
  p->set_rx_queues(1);
  p->set_miss_budget_dropped(7);
  p->set_rx_dropped(12);
  p->set_rx_missed(11);
  p->set_miss_throttled_polls(9);
  std::string ports = formatPorts(reply);
  CHECK_THAT(ports, Catch::StartsWith("PORT  NAME    ROLE         STATE  RX  TX  RX_DROP  RX_MISSED  TX_DROP  MISS_DROP  "
                                      "THROTTLED  BACKEND  MBUFS  RXQ  WORKER  LOGICAL  DEVARGS\n"));
  CHECK_THAT(ports, Catch::Contains("2     pf0vf1  representor  up     5   0   12       11         0        7          "
                                    "9          af_xdp   3104   1    0       -        net_af_xdp_pf0vf1"));
  CHECK_THAT(ports, !Catch::Contains("\n\n"));  // no notes
  CHECK(formatStats(reply, true) == "COUNTER        VALUE  DESCRIPTION\nport_security  3      spoofed source\n");
  CHECK_THAT(formatStats(reply, false), Catch::Contains("ttl_expired"));
  CHECK_THAT(formatJson(reply), Catch::Contains("\"name\": \"pf0vf1\""));
  CHECK_THAT(formatJson(reply), Catch::Contains("\"miss_budget_dropped\""));
  CHECK_THAT(formatJson(reply), Catch::Contains("\"miss_throttled_polls\""));
  CHECK_THAT(formatJson(reply), Catch::Contains("\"rx_missed\""));
}

TEST_CASE("dpuctl: ports that are not on their first backend or not open say why below the table", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  auto* fallback = reply.add_ports();
  fallback->set_name("pf0vf2");
  fallback->set_role("representor");
  fallback->set_dpdk_port(3);
  fallback->set_state("up");
  fallback->set_backend("af_packet");
  fallback->set_backend_reason("af_xdp: mbuf budget: pf0vf2 on af_xdp needs 3104 mbufs");
  fallback->set_mbufs(32);
  fallback->set_worker(0);
  auto* failed = reply.add_ports();
  failed->set_name("pf0vf31");
  failed->set_role("representor");
  failed->set_state("failed");
  failed->set_error("RTE_MAX_ETHPORTS (32) ports are in use");
  failed->set_retry_in_ms(4000);
  failed->set_logical_port("att-1");
  failed->set_worker(-1);
  auto* uplink = reply.add_ports();
  uplink->set_name("uplink");
  uplink->set_role("uplink");
  uplink->set_dpdk_port(0);
  uplink->set_state("up");
  uplink->set_backend("af_xdp");
  const std::string text = formatPorts(reply);
  INFO(text);
  // The open ports by port, the failed one last, with no port and no worker.
  CHECK(text.find("uplink") < text.find("pf0vf2"));
  CHECK_THAT(text, Catch::Contains("-     pf0vf31  representor  failed  0   0   0        0          0        0          "
                                   "0          -          0      -    -       att-1"));
  CHECK_THAT(text, Catch::EndsWith(
                       "\n\npf0vf2: af_packet, not the first choice: af_xdp: mbuf budget: pf0vf2 on af_xdp needs 3104 mbufs\n"
                       "pf0vf31: not open: RTE_MAX_ETHPORTS (32) ports are in use (next attempt in 4.0s)\n"));
}

TEST_CASE("dpuctl: a port's receive queues, the worker of each, and what each worker received", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  auto* uplink = reply.add_ports();
  uplink->set_name("uplink");
  uplink->set_role("uplink");
  uplink->set_dpdk_port(0);
  uplink->set_state("up");
  uplink->set_backend("af_packet");
  uplink->set_rx_packets(30);
  uplink->set_rx_queues(2);
  uplink->set_rx_spread("kernel fanout");
  uplink->set_worker(0);
  uplink->add_queue_workers(0);
  uplink->add_queue_workers(1);
  uplink->add_worker_rx_packets(12);
  uplink->add_worker_rx_packets(18);
  auto* rep = reply.add_ports();
  rep->set_name("pf0vf1");
  rep->set_role("representor");
  rep->set_dpdk_port(1);
  rep->set_state("up");
  rep->set_backend("af_packet");
  rep->set_rx_packets(4);
  rep->set_rx_queues(1);
  rep->set_worker(1);
  rep->add_queue_workers(1);
  rep->add_worker_rx_packets(0);
  rep->add_worker_rx_packets(4);
  const std::string text = formatPorts(reply);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("af_packet  0      2    0,1     -"));
  CHECK_THAT(text, Catch::Contains("af_packet  0      1    1       -"));
  // Only a port more than one worker received on gets the split.
  CHECK_THAT(text, Catch::EndsWith("\n\nuplink: rx by worker: worker 0 12, worker 1 18 (kernel fanout)\n"));
}

TEST_CASE("dpuctl: problems, one row per object not forwarding, or a line saying none", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  reply.set_generation(7);
  CHECK(formatProblems(reply) == "no problems: every object of the model in force (generation 7) is forwarding\n");
  auto* p = reply.add_problems();
  p->set_kind(dpu::dataplane::v1::ObjectProblem::PORT);
  p->set_name("att-1");
  p->set_state(dpu::dataplane::v1::ObjectProblem::REFUSED);
  p->set_reason("mac 0a:58:a9:fe:00:01 is the router MAC");
  auto* q = reply.add_problems();
  q->set_kind(dpu::dataplane::v1::ObjectProblem::REMOTE_NODE);
  q->set_name("node3");
  q->set_state(dpu::dataplane::v1::ObjectProblem::PORT_UNAVAILABLE);
  q->set_reason("x");
  CHECK(formatProblems(reply) ==
        "KIND         NAME   STATE             REASON\n"
        "port         att-1  refused           mac 0a:58:a9:fe:00:01 is the router MAC\n"
        "remote-node  node3  port-unavailable  x\n");
  CHECK_THAT(formatJson(reply), Catch::Contains("\"state\": \"REFUSED\""));
  auto* pp = reply.add_problems();
  pp->set_kind(dpu::dataplane::v1::ObjectProblem::PORT_POLICY);
  pp->set_name("att-2");
  pp->set_state(dpu::dataplane::v1::ObjectProblem::REFUSED);
  pp->set_reason("ingress.rules[0].peers \"10.0.0.0/33\": bad prefix");
  CHECK_THAT(formatProblems(reply), Catch::Contains("port-policy  att-2  refused           ingress.rules[0].peers"));
}

TEST_CASE("dpuctl: start-up phases, milliseconds from the process's start", "[dpuctl]") {
  dpu::dataplane::v1::OperatorReply reply;
  CHECK_THAT(formatStartup(reply), Catch::Contains("no start-up phases"));
  auto add = [&](const char* name, uint64_t start_us, uint64_t duration_us, bool moment) {
    auto* p = reply.add_startup();
    p->set_name(name);
    p->set_start_us(start_us);
    p->set_duration_us(duration_us);
    p->set_moment(moment);
  };
  add("eal", 100, 150'000, false);
  add("port uplink af_xdp", 240'300, 40'050, false);
  add("agent connected", 300'000, 0, true);
  CHECK(formatStartup(reply) ==
        "PHASE               START_MS  DURATION_MS\n"
        "eal                 0.1       150.0\n"
        "port uplink af_xdp  240.3     40.0\n"
        "agent connected     300.0     -\n"
        "not forwarding yet: waiting for the agent's first full sync\n");
  add("forwarding", 402'700, 0, true);
  reply.set_startup_us(402'700);
  CHECK_THAT(formatStartup(reply), Catch::EndsWith("forwarding          402.7     -\n"));
}

TEST_CASE("dpuctl: neighbours, the host PF's MACs and the node network's neighbours", "[dpuctl][north-south]") {
  dpu::dataplane::v1::OperatorReply reply;
  CHECK(formatNeighbours(reply).rfind("host PF: none (no host_pf port", 0) == 0);
  auto* ns = reply.mutable_north_south();
  ns->set_host_pf("host_pf");
  ns->set_host_pf_dpdk_port(3);
  ns->add_node_ips("172.18.0.1/24");
  ns->add_node_gateways("172.18.0.254");
  ns->set_host_macs_max(16);
  ns->set_host_mac_ageing_ms(300000);
  ns->set_neighbours_max(1024);
  auto* h = ns->add_host_macs();
  h->set_mac("02:18:00:00:00:01");
  h->set_idle_ms(1500);
  h->set_age_ms(61000);
  h->add_node_ips("172.18.0.1");
  auto* n = ns->add_neighbours();
  n->set_ip("172.18.0.254");
  n->set_mac("02:18:00:00:00:fe");
  n->set_state("reachable");
  n->set_confirmed_ms(2000);
  n->set_learned_from("ARP reply to the host");
  n->set_requests(1);
  auto* i = ns->add_neighbours();
  i->set_ip("172.18.0.9");
  i->set_state("incomplete");
  i->set_confirmed_ms(300);
  i->set_requests(2);
  CHECK(formatNeighbours(reply) ==
        "host PF: host_pf (DPDK port 3)\n"
        "node IPs: 172.18.0.1/24; gateways: 172.18.0.254\n"
        "\n"
        "host MACs (1 of at most 16, forgotten after 5m00s idle):\n"
        "MAC                NODE_IPS    IDLE  AGE\n"
        "02:18:00:00:00:01  172.18.0.1  1.5s  1m01s\n"
        "\n"
        "neighbours on the node network (2, at most 1024 with a MAC):\n"
        "IP            MAC                STATE       CONFIRMED  REQUESTS  LEARNED_FROM\n"
        "172.18.0.254  02:18:00:00:00:fe  reachable   2.0s ago   1         ARP reply to the host\n"
        "172.18.0.9    -                  incomplete  300ms ago  2         -\n");
  CHECK_THAT(formatJson(reply), Catch::Contains("\"learned_from\": \"ARP reply to the host\""));
}

namespace {

void addConnection(dpu::dataplane::v1::OperatorReply& r, const std::string& protocol, const std::string& original,
                   const std::string& reply, const std::string& state, const std::string& nat,
                   const std::string& service, uint64_t idle_ms, uint64_t expires_ms) {
  auto* c = r.add_conntrack();
  c->set_protocol(protocol);
  c->set_original(original);
  c->set_reply(reply);
  c->set_state(state);
  c->set_nat(nat);
  c->set_service(service);
  c->set_idle_ms(idle_ms);
  c->set_expires_in_ms(expires_ms);
}

}  // namespace

TEST_CASE("dpuctl: services, one row per frontend, then each service port's backends", "[dpuctl][services]") {
  namespace v1 = dpu::dataplane::v1;
  v1::OperatorReply services;
  auto frontend = [&](const char* kind, const char* ip, uint32_t port, bool local_only) {
    auto* f = services.add_services();
    f->set_service("default/web");
    f->set_port_name("http");
    f->set_kind(kind);
    f->set_ip(ip);
    f->set_port(port);
    f->set_protocol("tcp");
    f->set_local_only(local_only);
    f->set_affinity_timeout_s(10800);
    f->set_maglev_size(65537);
    auto backend = [f](const char* ip, const char* condition, bool local, double share, double local_share) {
      auto* b = f->add_backends();
      b->set_ip(ip);
      b->set_port(8080);
      b->set_condition(condition);
      b->set_local(local);
      b->set_share(share);
      b->set_local_share(local_share);
    };
    backend("10.244.1.5", "ready", true, 0.5, 1.0);
    backend("10.244.2.7", "ready", false, 0.5, 0.0);
    backend("10.244.2.8", "unused", false, 0.0, 0.0);
  };
  frontend("cluster-ip", "10.96.0.10", 80, false);
  frontend("node-port", "192.168.1.10", 30080, true);
  auto* dns = services.add_services();
  dns->set_service("kube-system/dns");
  dns->set_kind("cluster-ip");
  dns->set_ip("fd00:96::a");
  dns->set_port(53);
  dns->set_protocol("udp");
  dns->set_maglev_size(251);

  v1::OperatorReply conntrack;
  addConnection(conntrack, "tcp", "10.244.1.9:40000 -> 10.96.0.10:80", "10.244.2.7:8080 -> 10.244.1.9:40000",
                "established", "dnat", "default/web", 0, 0);
  addConnection(conntrack, "tcp", "10.244.1.9:40001 -> 10.96.0.10:80", "10.244.1.5:8080 -> 10.244.1.9:40001",
                "syn-sent", "dnat", "default/web", 0, 0);
  addConnection(conntrack, "udp", "10.244.1.9:40002 -> 10.96.0.10:80", "", "new", "", "", 0, 0);  // not tcp
  addConnection(conntrack, "udp", "[fd00:244::9]:5353 -> [fd00:96::a]:53", "", "replied", "dnat", "", 0, 0);
  conntrack.set_conntrack_entries(4);

  CHECK(formatServices(services, conntrack) ==
        "SERVICE          PORT  KIND        ADDRESS             PROTO  POLICY   AFFINITY  BACKENDS  MAGLEV  CONNECTIONS\n"
        "default/web      http  cluster-ip  10.96.0.10:80       tcp    cluster  3h00m     2/3       65537   2\n"
        "default/web      http  node-port   192.168.1.10:30080  tcp    local    3h00m     1/3       65537   0\n"
        "kube-system/dns  -     cluster-ip  [fd00:96::a]:53     udp    cluster  -         0/0       251     1\n"
        "\n"
        "SERVICE      PORT  BACKEND          CONDITION  NODE    SHARE  LOCAL_SHARE\n"
        "default/web  http  10.244.1.5:8080  ready      local   50.0%  100.0%\n"
        "default/web  http  10.244.2.7:8080  ready      remote  50.0%  -\n"
        "default/web  http  10.244.2.8:8080  unused     remote  0.0%   -\n");

  // A conntrack answer that listed fewer entries than the table holds: the counts say so.
  conntrack.set_conntrack_entries(80000);
  CHECK_THAT(formatServices(services, conntrack),
             Catch::Contains("connections counted over 4 of the 80000 tracked"));

  v1::OperatorReply none;
  none.set_generation(3);
  CHECK(formatServices(none, conntrack) == "no services: the model in force (generation 3) balances none\n");
  dns->clear_backends();
  v1::OperatorReply only_dns;
  *only_dns.add_services() = *dns;
  CHECK_THAT(formatServices(only_dns, none), Catch::EndsWith("no backends: every service port is without endpoints "
                                                             "(connections are refused)\n"));
}

TEST_CASE("dpuctl: conntrack, the connections, the table's fill and the counts per state", "[dpuctl][services]") {
  dpu::dataplane::v1::OperatorReply reply;
  addConnection(reply, "tcp", "10.244.1.9:40000 -> 10.96.0.10:80", "10.244.2.7:8080 -> 10.244.1.9:40000",
                "established", "dnat", "default/web", 1500, 86398500);
  addConnection(reply, "udp", "10.244.1.9:5000 -> 203.0.113.7:53", "203.0.113.7:53 -> 192.168.1.10:61000", "new",
                "snat", "", 250, 29750);
  auto state = [&reply](const char* name, uint64_t count) {
    auto* s = reply.add_conntrack_states();
    s->set_state(name);
    s->set_count(count);
  };
  state("new", 1);
  state("replied", 0);
  state("established", 7);
  reply.set_conntrack_entries(8);
  reply.set_conntrack_capacity(1000);
  CHECK(formatConntrack(reply) ==
        "PROTO  ORIGINAL                           REPLY                                 STATE        NAT   SERVICE      "
        "IDLE   EXPIRES\n"
        "tcp    10.244.1.9:40000 -> 10.96.0.10:80  10.244.2.7:8080 -> 10.244.1.9:40000   established  dnat  default/web  "
        "1.5s   23h59m\n"
        "udp    10.244.1.9:5000 -> 203.0.113.7:53  203.0.113.7:53 -> 192.168.1.10:61000  new          snat  -            "
        "250ms  29.7s\n"
        "\n"
        "listed 2; tracked 8 of at most 1000 (0.8%, conntrack.max_entries)\n"
        "by state: new 1, established 7\n");

  // A table that has been full: what it did about it.
  reply.set_conntrack_early_dropped(9120);
  reply.set_conntrack_refused_full(3);
  CHECK_THAT(formatConntrack(reply),
             Catch::EndsWith("by state: new 1, established 7\nfull since start: 9120 unanswered connections gave "
                             "their places to new ones, 3 new connections refused (ConntrackFull)\n"));

  dpu::dataplane::v1::OperatorReply empty;
  empty.set_conntrack_capacity(262144);
  CHECK(formatConntrack(empty) ==
        "no connections match\n\nlisted 0; tracked 0 of at most 262144 (0.0%, conntrack.max_entries)\nby state: none\n");
}

TEST_CASE("dpuctl: policy, per port each direction's isolation with its policies' denials, then the rules",
          "[dpuctl][policy]") {
  dpu::dataplane::v1::OperatorReply reply;
  CHECK(formatPolicy(reply) == "no port is isolated (no PortPolicy in force)\n");
  auto* pp = reply.add_port_policies();
  pp->set_port("att-1");
  pp->set_pod("x/a");
  auto* in = pp->mutable_ingress();
  in->set_isolated(true);
  in->add_policies("x/allow-web");
  in->add_policies("x/deny-all");
  auto* r = in->add_rules();
  r->add_peers("10.244.2.0/24");
  r->add_peers("10.244.3.0/24");
  r->set_protocol(6);
  r->set_port_first(80);
  r->set_port_last(81);
  r->set_policy("x/allow-web");
  auto* any = in->add_rules();
  any->add_peers("0.0.0.0/0");
  any->set_protocol(0);
  any->set_port_last(65535);
  any->set_policy("x/allow-web");
  auto* out = pp->mutable_egress();
  out->set_isolated(true);
  out->add_policies("x/no-egress");
  auto drop = [&reply](const char* policy, uint64_t n) {
    auto* d = reply.add_policy_drops();
    d->set_policy(policy);
    d->set_dropped(n);
  };
  drop("x/allow-web", 4);
  drop("x/deny-all", 4);
  drop("x/no-egress", 0);
  CHECK(formatPolicy(reply) ==
        "port att-1 (x/a)\n"
        "  ingress: isolated by x/allow-web (denied 4) x/deny-all (denied 4)\n"
        "    allow tcp ports 80-81 from 10.244.2.0/24,10.244.3.0/24  [x/allow-web]\n"
        "    allow any from 0.0.0.0/0  [x/allow-web]\n"
        "  egress: isolated by x/no-egress (denied 0)\n"
        "    nothing allowed\n");
  // dump-flows names what allowed each flow.
  dpu::dataplane::v1::OperatorReply flows;
  auto* f = flows.add_flows();
  f->set_match("in_port=2,ip,nw_src=10.244.1.5");
  f->set_actions("output:3");
  f->set_offload_status("software: no offload backend");
  f->set_policy("egress not isolated, ingress x/allow-web");
  CHECK(formatFlows(flows).find(", actions:output:3, policy:egress not isolated, ingress x/allow-web\n") !=
        std::string::npos);
}

TEST_CASE("dpuctl: ipsec, one row per SA with its peer, SPI, epochs, sequence and counters", "[dpuctl][ipsec]") {
  dpu::dataplane::v1::OperatorReply r;
  auto* info = r.mutable_ipsec();
  CHECK_THAT(formatIpsec(r), Catch::Contains("encryption: off") && Catch::Contains("no IPsec SA in force"));
  info->set_encrypt(true);
  info->set_crypto_backend("ipsec-mb");
  auto* out = info->add_sas();
  out->mutable_state()->set_name("node-b/out/21f23afc");
  out->mutable_state()->set_direction(dpu::dataplane::v1::OUTBOUND);
  out->mutable_state()->set_spi(0x21f23afc);
  out->mutable_state()->set_remote_node("node-b");
  out->mutable_state()->set_packets(5);
  out->mutable_state()->set_highest_sequence(5);
  out->mutable_state()->set_limit_drops(1);
  out->set_peer_tunnel_ip("192.168.50.2");
  out->set_local_epoch(1);
  out->set_remote_epoch(2);
  out->set_sequence_limit(1099511627776);
  out->set_age_ms(61000);
  auto* in = info->add_sas();
  in->mutable_state()->set_name("node-b/in/12072b8a");
  in->mutable_state()->set_direction(dpu::dataplane::v1::INBOUND);
  in->mutable_state()->set_spi(0x12072b8a);
  in->mutable_state()->set_remote_node("node-b");
  in->mutable_state()->set_first_packet_received(true);
  in->mutable_state()->set_highest_sequence(9);
  in->set_peer_tunnel_ip("192.168.50.2");
  in->set_local_epoch(1);
  in->set_remote_epoch(2);
  const std::string text = formatIpsec(r);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("encryption: on"));
  CHECK_THAT(text, Catch::Contains("crypto backend: ipsec-mb"));
  CHECK_THAT(text, Catch::Contains("node-b/out/21f23afc"));
  CHECK_THAT(text, Catch::Contains("0x21f23afc"));
  CHECK_THAT(text, Catch::Contains("5/1099511627776"));
  CHECK_THAT(text, Catch::Contains("9 (in use)"));
  CHECK_THAT(text, Catch::Contains("node-b 192.168.50.2"));
  CHECK_THAT(text, Catch::Contains("1m01s"));
  CHECK_THAT(text, !Catch::Contains("rotation requests"));  // none made: no line
  info->set_rotation_requests(2);
  info->set_rotations_taken(1);
  CHECK_THAT(formatIpsec(r), Catch::Contains("rotation requests (dpuctl ipsec rotate) to this dataplane: 2, taken by "
                                             "the agent: 1"));
  const std::string rotate = formatIpsecRotate(r);
  INFO(rotate);
  CHECK_THAT(rotate, Catch::StartsWith("rotation requested (request 2 to this dataplane; the agent has taken 1)"));
  CHECK_THAT(rotate, Catch::Contains("within a second"));
}

TEST_CASE("dpuctl: ipsec shows the agent's key rotation as it reported it, and says when it did not",
          "[dpuctl][ipsec]") {
  dpu::dataplane::v1::OperatorReply r;
  auto* info = r.mutable_ipsec();
  CHECK_THAT(formatIpsec(r), Catch::Contains("key rotation: no report from dpu-agent since this dataplane started"));
  auto* rot = info->mutable_rotation();
  rot->set_phase("grace");
  rot->set_current_epoch(4);
  rot->set_previous_epoch(3);
  rot->set_previous_accepted_for_ms(2600);
  rot->set_waiting_for("the end of epoch 3's grace period");
  rot->set_rotations_started(2);
  auto* p = rot->add_peers();
  p->set_node("node-b");
  p->set_advertised_epoch(7);
  p->set_sending_epoch(7);
  p->set_inbound_sas(2);
  p = rot->add_peers();
  p->set_node("node-c");
  p->set_problem("its public key is not 32 bytes of base64");
  info->set_rotation_reported_ms_ago(400);
  std::string text = formatIpsec(r);
  INFO(text);
  // Without an SA the rotation still shows: its peers say why there is none.
  CHECK_THAT(text, Catch::Contains("no IPsec SA in force"));
  CHECK_THAT(text, Catch::Contains("key rotation (dpu-agent, reported 400ms ago): grace\n"));
  CHECK_THAT(text, Catch::Contains("  epoch 4 in use; epoch 3 still accepted for 2.6s\n"));
  CHECK_THAT(text, Catch::Contains("  waiting for the end of epoch 3's grace period\n"));
  CHECK_THAT(text, Catch::Contains("rotations started since the agent started: 2"));
  CHECK_THAT(text, Catch::Matches(R"((.|\n)*node-b +7 +7 +2 +-\n(.|\n)*)"));
  CHECK_THAT(text, Catch::Matches(R"((.|\n)*node-c +- +- +0 +its public key is not 32 bytes of base64\n(.|\n)*)"));
  CHECK_THAT(text, !Catch::Contains("stale"));
  rot->set_phase("installing");
  rot->set_next_epoch(5);
  rot->set_deferred("the current epoch's grace period");
  info->set_rotation_reported_ms_ago(12'000);
  text = formatIpsec(r);
  CHECK_THAT(text, Catch::Contains("reported 12.0s ago; stale: the agent has stopped polling this dataplane): installing"));
  CHECK_THAT(text, Catch::Contains("epoch 4 in use; epoch 5 being installed; epoch 3 still accepted for 2.6s"));
  CHECK_THAT(text, Catch::Contains("a requested rotation waits: the current epoch's grace period"));
  rot->set_phase("publishing");
  CHECK_THAT(formatIpsec(r), Catch::Contains("epoch 5 installed, being published"));
}
