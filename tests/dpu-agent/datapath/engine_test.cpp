// Component tests of the Engine: EAL in-process (--no-huge, no PCI), net_ring
// ports, a programmed model, packets built by PacketBuilder injected through
// processBurst, and what each ring port transmitted compared byte for byte
// with packets built independently (PacketBuilder for plain packets, the
// overlay library's reference Geneve encapsulation for tunnelled ones).
// EAL initialises once per process, so every EAL test lives in this binary.
#include "engine_fixture.h"

using namespace engine_test;


TEST_CASE("engine: create refuses bad configuration with the field to fix", "[engine]") {
  env();
  EngineConfig c;
  c.workers = 0;
  auto r = Engine::create(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("workers") != std::string::npos);
  c.workers = 1;
  c.flow_cache_entries = 2;
  CHECK_FALSE(Engine::create(c).ok());
  c.flow_cache_entries = 64;
  c.tunnel_ip = "not-an-ip";
  r = Engine::create(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("tunnel_ip") != std::string::npos);
  c.tunnel_ip.clear();
  for (uint32_t budget : {0u, EngineConfig::kMaxMissBudget + 1}) {
    c.miss_budget = budget;
    r = Engine::create(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("miss_budget must be 1..1048576") &&
                              Catch::Contains("got " + std::to_string(budget)));
  }
  c.miss_budget = EngineConfig::kDefaultMissBudget;
  for (uint32_t share : {0u, 101u}) {
    c.miss_cycle_share = share;
    r = Engine::create(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("miss_cycle_share must be 1..100 percent") &&
                              Catch::Contains("got " + std::to_string(share)));
  }
}

TEST_CASE("engine: local pod to pod is routed through the gateway MAC", "[engine]") {
  Fixture f;
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  auto out = Fixture::drain(kRepB);
  REQUIRE(out.size() == 1);
  CHECK(dpu::test::toHex(out[0].data(), out[0].size()) ==
        dpu::test::toHex(udp4(kMacB, kRouterMac, "10.244.1.5", "10.244.1.6", 63).data(),
                         udp4(kMacB, kRouterMac, "10.244.1.5", "10.244.1.6", 63).size()));
  // The second packet hits the cached flow and comes out the same.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  auto again = Fixture::drain(kRepB);
  REQUIRE(again.size() == 1);
  CHECK(again[0] == out[0]);
  CHECK(f.stat("FlowHit") == 1);
  CHECK(f.stat("FlowMiss") == 1);
  // IPv6 too, hop limit decremented.
  f.inject(kRepB, tcp6(kRouterMac, kMacB, "fd00:10:244:1::6", "fd00:10:244:1::5"));
  auto v6 = Fixture::drain(kRepA);
  REQUIRE(v6.size() == 1);
  CHECK(v6[0] == tcp6(kMacA, kRouterMac, "fd00:10:244:1::6", "fd00:10:244:1::5", 63));
}

TEST_CASE("engine: management port reaches pods and pods reach it", "[engine]") {
  Fixture f;
  f.inject(kMgmt, udp4(kRouterMac, kMacMgmt, "10.244.1.2", "10.244.1.5"));
  auto to_pod = Fixture::drain(kRepA);
  REQUIRE(to_pod.size() == 1);
  CHECK(to_pod[0] == udp4(kMacA, kRouterMac, "10.244.1.2", "10.244.1.5", 63));
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.2"));
  auto to_host = Fixture::drain(kMgmt);
  REQUIRE(to_host.size() == 1);
  CHECK(to_host[0] == udp4(kMacMgmt, kRouterMac, "10.244.1.5", "10.244.1.2", 63));
  // The host reaches remote pods through the tunnel as well.
  f.inject(kMgmt, udp4(kRouterMac, kMacMgmt, "10.244.1.2", "10.244.2.7"));
  CHECK(Fixture::drain(kUplink).size() == 1);
}

TEST_CASE("engine: pod to a remote node is Geneve with the OVN option to its tunnel IP", "[engine]") {
  Fixture f;
  const Bytes in = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
  f.inject(kRepA, in);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  const Bytes inner = udp4(kRouterMac, kRouterMac, "10.244.1.5", "10.244.2.7", 63);
  const Bytes expected = geneve(inner, kUplinkMac, kNextHopMac, "192.168.100.1", "192.168.100.2", 20, 1, 0x8000,
                                innerHash(in, env().port[kRepA]));
  CHECK(dpu::test::toHex(out[0].data(), out[0].size()) == dpu::test::toHex(expected.data(), expected.size()));
  // Cached: the next packet of the flow is encapsulated identically.
  f.inject(kRepA, in);
  auto again = Fixture::drain(kUplink);
  REQUIRE(again.size() == 1);
  CHECK(again[0] == expected);

  // IPv6 inner over the IPv4 underlay.
  const Bytes in6 = tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9");
  f.inject(kRepA, in6);
  auto out6 = Fixture::drain(kUplink);
  REQUIRE(out6.size() == 1);
  CHECK(out6[0] == geneve(tcp6(kRouterMac, kRouterMac, "fd00:10:244:1::5", "fd00:10:244:2::9", 63), kUplinkMac,
                          kNextHopMac, "192.168.100.1", "192.168.100.2", 20, 1, 0x8000,
                          innerHash(in6, env().port[kRepA])));
}

TEST_CASE("engine: Geneve from a known peer is decapsulated and delivered to the pod", "[engine]") {
  Fixture f;
  const Bytes inner = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);
  f.inject(kUplink, fromRemote(inner));
  auto out = Fixture::drain(kRepA);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == udp4(kMacA, kRouterMac, "10.244.2.7", "10.244.1.5", 63));
  // The egress key may name the destination port itself.
  f.inject(kUplink, fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.6", 63), 10, 9, 2));
  CHECK(Fixture::drain(kRepB).size() == 1);
}

TEST_CASE("engine: tunnel receive drops unknown peers, VNIs, wrong egress and spoofed sources", "[engine]") {
  Fixture f;
  const Bytes inner = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);
  f.inject(kUplink, fromRemote(inner, 10, 9, 0x8000, "192.168.100.99"));
  CHECK(f.stat("UnknownTunnelPeer") == 1);
  f.inject(kUplink, fromRemote(inner, 4242));
  CHECK(f.stat("UnknownVni") == 1);
  f.inject(kUplink, fromRemote(inner, 10, 9, 2));  // egress key of pod-b, inner destination pod-a
  CHECK(f.stat("WrongEgressPort") == 1);
  f.inject(kUplink, fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.3.7", "10.244.1.5", 63)));
  CHECK(f.stat("TunnelSourceSpoof") == 1);
  f.inject(kUplink, fromRemote(inner, 10, 9, 0x8000, "192.168.100.2", "192.168.100.50"));
  CHECK(f.stat("WrongTunnelDestination") == 1);
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(Fixture::drain(kRepB).empty());
  // Plain traffic on the uplink is not ours.
  f.inject(kUplink, udp4(kUplinkMac, kNextHopMac, "192.168.100.2", "192.168.100.1"));
  CHECK(f.stat("NotGeneve") == 1);
}

// The uplink's lane looks a decapsulated packet up with its tunnel: a flow
// cached for one remote and OVN keys serves no packet that differs only in
// them, in a table the lookups prefetch in one pass (resident) or two.
TEST_CASE("engine: a cached tunnel flow serves only its own remote and OVN keys", "[engine]") {
  for (const uint32_t entries : {1024u, 65536u}) {
    EngineConfig config;
    config.flow_cache_entries = entries;
    Fixture f(config);
    INFO("flow cache entries " << entries << (f.engine->worker(0).table.cacheResident() ? " (resident)" : ""));
    const Bytes inner = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);
    const Bytes delivered = udp4(kMacA, kRouterMac, "10.244.2.7", "10.244.1.5", 63);
    f.inject(kUplink, std::vector<Bytes>{fromRemote(inner), fromRemote(inner), fromRemote(inner)});
    auto out = Fixture::drain(kRepA);
    REQUIRE(out.size() == 3);
    CHECK(out[2] == delivered);
    CHECK(f.stat("FlowMiss") == 1);
    CHECK(f.stat("FlowHit") == 2);
    // The same inner packet with pod-b's egress key, from a node that is no
    // peer, from the peer's other address: each decided afresh and refused,
    // in one burst with packets of the cached flow.
    f.inject(kUplink, std::vector<Bytes>{fromRemote(inner, 10, 9, 2), fromRemote(inner),
                                         fromRemote(inner, 10, 9, 0x8000, "192.168.100.99"), fromRemote(inner)});
    CHECK(f.stat("WrongEgressPort") == 1);
    CHECK(f.stat("UnknownTunnelPeer") == 1);
    CHECK(Fixture::drain(kRepA).size() == 2);
    CHECK(Fixture::drain(kRepB).empty());
    // Another ingress key is another flow (the NIC's rule matches it), delivered alike.
    f.inject(kUplink, fromRemote(inner, 10, 11));
    out = Fixture::drain(kRepA);
    REQUIRE(out.size() == 1);
    CHECK(out[0] == delivered);
    CHECK(f.stat("FlowMiss") == 4);
    CHECK(f.stat("FlowHit") == 4);
  }
}

TEST_CASE("engine: ARP and ND for the gateway are answered on the pod's port", "[engine]") {
  Fixture f;
  const Bytes req = PacketBuilder()
                        .ethernet(overlay::eth::kBroadcast, kMacA)
                        .arp(overlay::arp::kOpRequest, kMacA, ip4("10.244.1.5"), {}, ip4("10.244.1.1"))
                        .build();
  f.inject(kRepA, req);
  auto out = Fixture::drain(kRepA);
  REQUIRE(out.size() == 1);
  const Bytes expected = PacketBuilder()
                             .ethernet(kMacA, kRouterMac)
                             .arp(overlay::arp::kOpReply, kRouterMac, ip4("10.244.1.1"), kMacA, ip4("10.244.1.5"))
                             .build();
  CHECK(dpu::test::toHex(out[0].data(), out[0].size()) == dpu::test::toHex(expected.data(), expected.size()));
  CHECK(f.stat("ArpReply") == 1);
  // A neighbour in the pod's subnet (the attach API gives pods the subnet's
  // prefix, so they ARP each other) is answered with the router MAC too: the
  // pods reach each other routed through the gateway, never by flooding.
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::kBroadcast, kMacA)
                      .arp(overlay::arp::kOpRequest, kMacA, ip4("10.244.1.5"), {}, ip4("10.244.1.6"))
                      .build());
  auto neighbour = Fixture::drain(kRepA);
  REQUIRE(neighbour.size() == 1);
  const Bytes expected_neighbour = PacketBuilder()
                                       .ethernet(kMacA, kRouterMac)
                                       .arp(overlay::arp::kOpReply, kRouterMac, ip4("10.244.1.6"), kMacA, ip4("10.244.1.5"))
                                       .build();
  CHECK(dpu::test::toHex(neighbour[0].data(), neighbour[0].size()) ==
        dpu::test::toHex(expected_neighbour.data(), expected_neighbour.size()));
  CHECK(f.stat("ArpReply") == 2);
  CHECK(Fixture::drain(kRepB).empty());
  // ARP for an address outside the subnet, or for the pod's own (duplicate
  // address detection), is dropped and counted.
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::kBroadcast, kMacA)
                      .arp(overlay::arp::kOpRequest, kMacA, ip4("10.244.1.5"), {}, ip4("10.244.2.6"))
                      .build());
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::kBroadcast, kMacA)
                      .arp(overlay::arp::kOpRequest, kMacA, ip4("10.244.1.5"), {}, ip4("10.244.1.5"))
                      .build());
  CHECK(f.stat("ArpNotForGateway") == 2);
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(Fixture::drain(kRepB).empty());

  // Neighbor solicitation for the gateway's IPv6 address.
  const auto gw6 = ip6("fd00:10:244:1::1");
  const overlay::Ipv6Address snm = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, gw6[13], gw6[14], gw6[15]};
  const Bytes ns = PacketBuilder()
                       .ethernet(overlay::eth::ipv6MulticastMac(snm.data()), kMacA)
                       .ipv6({.src = ip6("fd00:10:244:1::5"), .dst = snm, .hop_limit = 255})
                       .neighborSolicit(gw6, kMacA)
                       .build();
  f.inject(kRepA, ns);
  auto na = Fixture::drain(kRepA);
  REQUIRE(na.size() == 1);
  const Bytes expected_na =
      PacketBuilder()
          .ethernet(kMacA, kRouterMac)
          .ipv6({.src = gw6, .dst = ip6("fd00:10:244:1::5"), .hop_limit = 255})
          .neighborAdvert(overlay::icmp6::kNaFlagRouter | overlay::icmp6::kNaFlagSolicited |
                              overlay::icmp6::kNaFlagOverride,
                          gw6, kRouterMac)
          .build();
  CHECK(dpu::test::toHex(na[0].data(), na[0].size()) == dpu::test::toHex(expected_na.data(), expected_na.size()));
  CHECK(f.stat("NdReply") == 1);

  // A neighbour in the pod's IPv6 subnet is answered with the router MAC too;
  // an address outside it is not.
  const auto nb6 = ip6("fd00:10:244:1::6");
  const overlay::Ipv6Address nb_snm = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, nb6[13], nb6[14], nb6[15]};
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::ipv6MulticastMac(nb_snm.data()), kMacA)
                      .ipv6({.src = ip6("fd00:10:244:1::5"), .dst = nb_snm, .hop_limit = 255})
                      .neighborSolicit(nb6, kMacA)
                      .build());
  auto nb_na = Fixture::drain(kRepA);
  REQUIRE(nb_na.size() == 1);
  const Bytes expected_nb_na =
      PacketBuilder()
          .ethernet(kMacA, kRouterMac)
          .ipv6({.src = nb6, .dst = ip6("fd00:10:244:1::5"), .hop_limit = 255})
          .neighborAdvert(overlay::icmp6::kNaFlagRouter | overlay::icmp6::kNaFlagSolicited |
                              overlay::icmp6::kNaFlagOverride,
                          nb6, kRouterMac)
          .build();
  CHECK(dpu::test::toHex(nb_na[0].data(), nb_na[0].size()) ==
        dpu::test::toHex(expected_nb_na.data(), expected_nb_na.size()));
  const auto far6 = ip6("fd00:10:244:2::6");
  const overlay::Ipv6Address far_snm = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, far6[13], far6[14], far6[15]};
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::ipv6MulticastMac(far_snm.data()), kMacA)
                      .ipv6({.src = ip6("fd00:10:244:1::5"), .dst = far_snm, .hop_limit = 255})
                      .neighborSolicit(far6, kMacA)
                      .build());
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("NdNotForGateway") == 1);
}

TEST_CASE("engine: flows that differ only in their MACs stay apart in the flow cache", "[engine]") {
  // The compact hash leaves the MACs out: such flows share a bucket pair,
  // and the key compare must still tell them apart, however many there are.
  Fixture f;
  const Bytes legit = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 4000);
  f.inject(kRepA, legit);
  CHECK(Fixture::drain(kRepB).size() == 1);
  std::vector<Bytes> burst{legit};
  for (uint8_t i = 1; i <= 20; ++i) {
    const overlay::MacAddress spoofed{0x0a, 0x58, 0x0a, 0xf4, 0x07, i};
    burst.push_back(udp4(kRouterMac, spoofed, "10.244.1.5", "10.244.1.6", 64, 4000));
    burst.push_back(legit);
  }
  for (int round = 0; round < 2; ++round) {
    f.inject(kRepA, burst);
    CHECK(Fixture::drain(kRepB).size() == 21);
  }
  CHECK(f.stat("PortSecurityMac") == 40);
  CHECK(f.stat("FlowHit") >= 42);  // the legit flow, every time
}

TEST_CASE("engine: port security drops MAC, IP, ARP and ND spoofing", "[engine]") {
  Fixture f;
  f.inject(kRepA, udp4(kRouterMac, kMacB, "10.244.1.5", "10.244.1.6"));  // pod-a sends as pod-b's MAC
  CHECK(f.stat("PortSecurityMac") == 1);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.6", "10.244.1.2"));  // pod-a sends from pod-b's IP
  CHECK(f.stat("PortSecurityIp") == 1);
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::kBroadcast, kMacA)
                      .arp(overlay::arp::kOpRequest, kMacB, ip4("10.244.1.5"), {}, ip4("10.244.1.1"))
                      .build());
  f.inject(kRepA, PacketBuilder()
                      .ethernet(overlay::eth::kBroadcast, kMacA)
                      .arp(overlay::arp::kOpReply, kMacA, ip4("10.244.1.6"), kMacB, ip4("10.244.1.6"))
                      .build());
  CHECK(f.stat("PortSecurityArp") == 2);
  const auto gw6 = ip6("fd00:10:244:1::1");
  f.inject(kRepA, PacketBuilder()
                      .ethernet(kRouterMac, kMacA)
                      .ipv6({.src = ip6("fd00:10:244:1::5"), .dst = gw6, .hop_limit = 255})
                      .neighborSolicit(gw6, kMacB)
                      .build());
  f.inject(kRepA, PacketBuilder()
                      .ethernet(kRouterMac, kMacA)
                      .ipv6({.src = ip6("fd00:10:244:1::5"), .dst = gw6, .hop_limit = 255})
                      .neighborAdvert(overlay::icmp6::kNaFlagOverride, ip6("fd00:10:244:1::6"), kMacA)
                      .build());
  CHECK(f.stat("PortSecurityNd") == 2);
  for (unsigned p = 0; p < kPorts; ++p) CHECK(Fixture::drain(p).empty());
  // A spoofing flow is cached as a drop: the second packet hits it.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.6", "10.244.1.2"));
  CHECK(f.stat("PortSecurityIp") == 2);
  CHECK(f.stat("FlowHit") == 1);
  // Unbound ports and unknown destinations.
  f.inject(kSpare, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  CHECK(f.stat("UnboundPort") == 1);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.77"));
  CHECK(f.stat("UnknownDestination") == 1);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "8.8.8.8"));
  CHECK(f.stat("NoRoute") == 1);
  f.inject(kRepA, udp4(kMacB, kMacA, "10.244.1.5", "10.244.1.6"));
  CHECK(f.stat("NotToGateway") == 1);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 1));
  CHECK(f.stat("TtlExpired") == 1);
}

TEST_CASE("engine: too big for the tunnel gets frag-needed / packet-too-big with the path MTU", "[engine]") {
  Fixture f;
  // Inner IPv4 of 1401 bytes (pod MTU 1400) with DF.
  const Bytes big = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1234, 1401 - 28, true);
  f.inject(kRepA, big);
  CHECK(Fixture::drain(kUplink).empty());
  auto icmp = Fixture::drain(kRepA);
  REQUIRE(icmp.size() == 1);
  overlay::ParsedPacket p;
  REQUIRE(overlay::parsePacket(icmp[0], p) == overlay::Status::kOk);
  CHECK(p.l4 == overlay::L4Type::kIcmp);
  CHECK(icmp[0][p.l4_offset] == overlay::icmp::kTypeDestUnreachable);
  CHECK(icmp[0][p.l4_offset + 1] == overlay::icmp::kCodeFragNeeded);
  CHECK(overlay::load16(icmp[0].data() + p.l4_offset + 6) == 1400);
  CHECK(overlay::ipv4::src(icmp[0].data() + p.l3_offset) == ip4("10.244.1.1"));
  CHECK(overlay::ipv4::dst(icmp[0].data() + p.l3_offset) == ip4("10.244.1.5"));
  CHECK(f.stat("IcmpFragNeeded") == 1);
  // Answered or not, the packet was dropped for its size: counted as such.
  CHECK(f.stat("MtuExceeded") == 1);
  // Exactly the MTU passes.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1234, 1400 - 28, true));
  CHECK(Fixture::drain(kUplink).size() == 1);
  CHECK(f.stat("MtuExceeded") == 1);
  // Without DF: dropped and counted, no ICMP.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1235, 1401 - 28, false));
  CHECK(f.stat("MtuExceeded") == 2);
  CHECK(f.stat("IcmpFragNeeded") == 1);
  CHECK(Fixture::drain(kRepA).empty());
  // IPv6: packet too big.
  f.inject(kRepA, tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9", 64, 1401 - 60));
  auto ptb = Fixture::drain(kRepA);
  REQUIRE(ptb.size() == 1);
  REQUIRE(overlay::parsePacket(ptb[0], p) == overlay::Status::kOk);
  CHECK(ptb[0][p.l4_offset] == overlay::icmp6::kTypePacketTooBig);
  CHECK(overlay::load32(ptb[0].data() + p.l4_offset + 4) == 1400);
  CHECK(f.stat("Icmp6PacketTooBig") == 1);
  CHECK(f.stat("MtuExceeded") == 3);
}

TEST_CASE("engine: malformed packets are dropped with the right reason", "[engine]") {
  Fixture f;
  Bytes good = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6");
  Bytes truncated(good.begin(), good.begin() + 20);
  f.inject(kRepA, truncated);
  CHECK(f.stat("Truncated") == 1);
  Bytes bad_len = good;
  overlay::store16(bad_len.data() + 14 + 2, 2000);  // IPv4 total length beyond the frame
  f.inject(kRepA, bad_len);
  CHECK(f.stat("BadIpv4TotalLength") == 1);
  Bytes bad_ihl = good;
  bad_ihl[14] = 0x43;
  f.inject(kRepA, bad_ihl);
  CHECK(f.stat("BadIpv4HeaderLength") == 1);
  // Geneve: an option length running past the packet, and a critical unknown option.
  Bytes tun = fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63));
  Bytes bad_opt = tun;
  bad_opt[14 + 20 + 8 + 8 + 3] = 0x1f;  // OVN option length 31 words
  f.inject(kUplink, bad_opt);
  Bytes bad_ver = tun;
  bad_ver[14 + 20 + 8] |= 0x40;  // version 1
  f.inject(kUplink, bad_ver);
  CHECK(f.stat("BadGeneveOption") + f.stat("BadGeneveLength") == 1);
  CHECK(f.stat("BadGeneveVersion") == 1);
  Bytes short_tun(tun.begin(), tun.begin() + 30);
  f.inject(kUplink, short_tun);
  CHECK(f.stat("Truncated") == 2);
  for (unsigned p = 0; p < kPorts; ++p) CHECK(Fixture::drain(p).empty());
}

TEST_CASE("engine: programming refuses a request whole only when nothing in it could work", "[engine]") {
  Fixture f(EngineConfig{}, false);
  dataplane::v1::ProgramRequest hello;
  hello.mutable_hello()->set_agent_id("test");
  auto h = f.engine->program(hello);
  CHECK(h.status() == dataplane::v1::OK);
  CHECK(h.hello().generation() == 0);
  CHECK_FALSE(h.hello().instance_id().empty());
  // Not programmed: packets are dropped, counted.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  CHECK(f.stat("NotProgrammed") == 1);

  // Node settings and identities (the model library's tests have every case).
  struct Case {
    const char* what;
    std::function<void(dataplane::v1::LogicalModel&)> mutate;
  };
  std::vector<Case> cases = {
      {"router_mac", [](auto& m) { m.mutable_node()->set_router_mac("zz"); }},
      {"tunnel_ip", [](auto& m) { m.mutable_node()->set_tunnel_ip(""); }},
      {"pod_mtu", [](auto& m) { m.mutable_node()->set_pod_mtu(0); }},
      {"duplicate port name", [](auto& m) { m.mutable_ports(1)->set_name("pod-a"); }},
  };
  for (const auto& c : cases) {
    auto m = baseModel();
    c.mutate(m);
    auto r = fullSync(*f.engine, m, 5);
    INFO(c.what << ": " << r.message());
    CHECK(r.status() == dataplane::v1::INVALID);
    CHECK(r.message().find(c.what) != std::string::npos);
    CHECK(r.generation() == 0);
  }
  CHECK(fullSync(*f.engine, baseModel(), 0).status() == dataplane::v1::INVALID);
  auto ok = fullSync(*f.engine, baseModel(), 5);
  REQUIRE(ok.status() == dataplane::v1::OK);
  CHECK(ok.problems().empty());
  auto names = f.engine->wantedRepresentors();  // the model in force
  // In the order to open them: the management port (key 3) first, then by key.
  CHECK(names == std::vector<std::string>{"pf0hpf", "pf0vf0", "pf0vf1"});
  REQUIRE(f.engine->wantedTunnelPeers().size() == 1);

  // Delta on a stale base: resync; deleting what does not exist: resync.
  dataplane::v1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(4);
  d.mutable_delta()->set_generation(6);
  CHECK(f.engine->program(d).status() == dataplane::v1::RESYNC_NEEDED);
  d.mutable_delta()->set_base_generation(5);
  d.mutable_delta()->add_delete_ports("nope");
  CHECK(f.engine->program(d).status() == dataplane::v1::RESYNC_NEEDED);
  // A Delta that makes the node settings unusable changes nothing.
  dataplane::v1::ProgramRequest bad;
  bad.mutable_delta()->set_base_generation(5);
  bad.mutable_delta()->set_generation(6);
  *bad.mutable_delta()->mutable_node() = baseModel().node();
  bad.mutable_delta()->mutable_node()->set_tunnel_ip("x");
  auto r = f.engine->program(bad);
  CHECK(r.status() == dataplane::v1::INVALID);
  CHECK(r.generation() == 5);
  bad.mutable_delta()->set_generation(5);
  bad.mutable_delta()->clear_node();
  CHECK(f.engine->program(bad).status() == dataplane::v1::INVALID);  // generation not above its base
  dataplane::v1::ProgramRequest empty;
  CHECK(f.engine->program(empty).status() == dataplane::v1::INVALID);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  CHECK(Fixture::drain(kRepB).size() == 1);
}

TEST_CASE("engine: a refused object is left out and reported; everything else is programmed", "[engine]") {
  Fixture f;
  auto problemsOf = [](const dataplane::v1::ProgramReply& r) {
    std::vector<std::string> out;
    for (const auto& p : r.problems()) {
      CHECK(p.state() == dataplane::v1::ObjectProblem::REFUSED);
      out.push_back(dataplane::v1::ObjectProblem::Kind_Name(p.kind()) + " " + p.name() + ": " + p.reason());
    }
    return out;
  };
  const Bytes a_to_b = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6");
  const Bytes a_to_remote = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
  const Bytes b_to_a = udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5");
  f.inject(kRepA, {a_to_b, a_to_remote});
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kUplink).size() == 1);

  // A new pod asking for the router's MAC, and a remote node claiming our own
  // subnet: both refused, the request is OK and moves the generation.
  auto m = baseModel();
  auto* c = m.add_ports();
  *c = m.ports(0);
  c->set_name("pod-c");
  c->set_key(7);
  c->set_representor("pf0vf7");
  c->set_mac("0a:58:a9:fe:00:01");
  c->clear_ips();
  c->add_ips("10.244.1.7");
  addRemoteNode(m, "node9", "192.168.100.9", "10.244.1.128/25", 90);
  auto r = fullSync(*f.engine, m, 2);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.generation() == 2);
  auto p = problemsOf(r);
  REQUIRE(p.size() == 2);
  CHECK_THAT(p[0], Catch::StartsWith("PORT pod-c: mac 0a:58:a9:fe:00:01 is the router MAC"));
  CHECK_THAT(p[1], Catch::StartsWith("REMOTE_NODE node9: subnet 10.244.1.128/25 overlaps local subnet 10.244.1.0/24"));
  CHECK(r.flows_removed() == 0);  // nothing in force changed for the flows there are
  CHECK(f.stat("ObjectRefused") == 2);
  // Not in force: its representor is not wanted, nor is the node's tunnel.
  CHECK(f.engine->wantedRepresentors() == std::vector<std::string>{"pf0hpf", "pf0vf0", "pf0vf1"});
  CHECK(f.engine->wantedTunnelPeers().size() == 1);
  f.inject(kRepA, {a_to_b, a_to_remote});
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kUplink).size() == 1);

  // Every reply carries them, Status and Hello included, and so does dpuctl's
  // problems; the same model again is not counted twice.
  dataplane::v1::ProgramRequest status;
  status.mutable_status();
  CHECK(problemsOf(f.engine->program(status)) == p);
  dataplane::v1::ProgramRequest hello;
  hello.mutable_hello();
  CHECK(problemsOf(f.engine->program(hello)) == p);
  dataplane::v1::OperatorRequest op;
  op.mutable_problems();
  CHECK(f.engine->operate(op).problems_size() == 2);
  REQUIRE(fullSync(*f.engine, m, 3).problems_size() == 2);
  CHECK(f.stat("ObjectRefused") == 2);

  // A Delta changing pod-b to pod-a's MAC refuses pod-b alone (pod-a holds
  // it); pod-b's traffic stops, pod-a's flows to the tunnel stay.
  dataplane::v1::ProgramRequest clash;
  clash.mutable_delta()->set_base_generation(3);
  clash.mutable_delta()->set_generation(4);
  auto* b = clash.mutable_delta()->add_upsert_ports();
  *b = baseModel().ports(1);
  b->set_mac("0a:58:0a:f4:01:05");
  r = f.engine->program(clash);
  REQUIRE(r.status() == dataplane::v1::OK);
  p = problemsOf(r);
  REQUIRE(p.size() == 3);
  CHECK_THAT(p[0], Catch::StartsWith("PORT pod-b: mac 0a:58:0a:f4:01:05 is used by port pod-a"));
  CHECK(f.stat("ObjectRefused") == 3);
  f.inject(kRepB, b_to_a);
  CHECK(f.stat("UnboundPort") == 1);
  f.inject(kRepA, {a_to_b, a_to_remote});
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("UnknownDestination") == 1);
  CHECK(Fixture::drain(kUplink).size() == 1);

  // Fixed by the next Delta: in force again, forwarding, nothing left refused
  // but the two others.
  clash.mutable_delta()->set_base_generation(4);
  clash.mutable_delta()->set_generation(5);
  *clash.mutable_delta()->mutable_upsert_ports(0) = baseModel().ports(1);
  clash.mutable_delta()->add_delete_ports("pod-c");
  clash.mutable_delta()->add_delete_remote_nodes("node9");
  r = f.engine->program(clash);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.problems().empty());
  f.inject(kRepB, b_to_a);
  CHECK(Fixture::drain(kRepA).size() == 1);
}

TEST_CASE("engine: the OVN egress key is the destination port's key when its node published it", "[engine]") {
  Fixture f;
  auto m = baseModel();
  auto* key = m.mutable_remote_nodes(0)->add_ports();
  key->set_ip("10.244.2.7");
  key->set_key(44);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dataplane::v1::OK);
  const Bytes known = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
  const Bytes unknown = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.8");
  auto expect = [&](const Bytes& in, const char* dst, uint16_t egress) {
    const Bytes inner = udp4(kRouterMac, kRouterMac, "10.244.1.5", dst, 63);
    return geneve(inner, kUplinkMac, kNextHopMac, "192.168.100.1", "192.168.100.2", 20, 1, egress,
                  innerHash(in, env().port[kRepA]));
  };
  for (int round = 0; round < 2; ++round) {  // the slow path, then the cached flow (the common encap routine)
    f.inject(kRepA, {known, unknown});
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 2);
    CHECK(dpu::test::toHex(out[0]) == dpu::test::toHex(expect(known, "10.244.2.7", 44)));
    CHECK(dpu::test::toHex(out[1]) == dpu::test::toHex(expect(unknown, "10.244.2.8", 0x8000)));
  }
  // What dump-flows (and offload) see: the same keys in the encap header.
  std::set<std::string> keys;
  for (const auto& fl : f.flows()) {
    const auto at = fl.actions().find("ingress=");
    if (at != std::string::npos) keys.insert(fl.actions().substr(at, fl.actions().find(",next_hop", at) - at));
  }
  CHECK(keys == std::set<std::string>{"ingress=1,egress=44", "ingress=1,egress=32768"});
  // The node publishes a key for the second address and moves the first:
  // its flows are decided again, with the new keys.
  m.mutable_remote_nodes(0)->mutable_ports(0)->set_key(45);
  key = m.mutable_remote_nodes(0)->add_ports();
  key->set_ip("10.244.2.8");
  key->set_key(46);
  REQUIRE(fullSync(*f.engine, m, 3).status() == dataplane::v1::OK);
  f.inject(kRepA, {known, unknown});
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 2);
  CHECK(dpu::test::toHex(out[0]) == dpu::test::toHex(expect(known, "10.244.2.7", 45)));
  CHECK(dpu::test::toHex(out[1]) == dpu::test::toHex(expect(unknown, "10.244.2.8", 46)));

  // Receiving: our port's key is what senders that know it send; the
  // router's 0x8000 (a sender without our key) is delivered too, counted.
  const Bytes inner = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);
  f.inject(kUplink, fromRemote(inner, 10, 9, 1));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("TunnelRouterEgressKey") == 0);
  f.inject(kUplink, fromRemote(inner, 10, 9, 0x8000));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("TunnelRouterEgressKey") == 1);
  f.inject(kUplink, fromRemote(inner, 10, 9, 0x8001));  // any other key: not ours
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("WrongEgressPort") == 1);
}

TEST_CASE("engine: a tunnel peer without a next hop gets broadcast frames, counted, until it resolves", "[engine]") {
  Fixture f;
  auto m = baseModel();
  addRemoteNode(m, "node3", "192.168.100.3", "10.244.3.0/24", 30);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dataplane::v1::OK);
  const Bytes in = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.3.9");
  const Bytes broadcast(6, 0xff);
  // The slow path's packet, then two hits (the common encap routine is not
  // theirs: it has no next hop to write).
  f.inject(kRepA, {in, in, in});
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 3);
  for (const auto& o : out) CHECK(Bytes(o.begin(), o.begin() + 6) == broadcast);
  CHECK(f.stat("TunnelNextHopUnresolved") == 3);
  CHECK(f.stat("FlowHit") == 2);
  // Resolved: the peer's flows are decided again (once), then leave to the
  // next hop, uncounted.
  const MacAddress hop{{0x02, 0, 0, 0, 0x03, 0}};
  REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse("192.168.100.3").value(), hop).ok());
  f.inject(kRepA, {in, in});
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 2);
  for (const auto& o : out) CHECK(Bytes(o.begin(), o.begin() + 6) == Bytes(hop.bytes.begin(), hop.bytes.end()));
  CHECK(f.stat("TunnelNextHopUnresolved") == 3);
  CHECK(f.stat("FlowMiss") == 2);
  CHECK(f.stat("FlowHit") == 3);
}

TEST_CASE("engine: a resync keeps unaffected flows; removals invalidate theirs", "[engine]") {
  Fixture f;
  const Bytes local = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6");
  const Bytes remote = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
  f.inject(kRepA, {local, local, remote});
  CHECK(Fixture::drain(kRepB).size() == 2);
  CHECK(Fixture::drain(kUplink).size() == 1);
  REQUIRE(f.flows().size() == 2);

  // The agent restarts and resyncs the same model with a new generation, plus a new node.
  auto m = baseModel();
  addRemoteNode(m, "node3", "192.168.100.3", "10.244.3.0/24", 30);
  auto r = fullSync(*f.engine, m, 7);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.flows_removed() == 0);
  f.inject(kRepA, local);
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("FlowInvalidated") == 0);
  bool found = false;
  for (const auto& fl : f.flows()) {
    if (fl.match().find("nw_dst=10.244.1.6") != std::string::npos) {
      CHECK(fl.packets() == 3);  // stats kept across the resync
      found = true;
    }
  }
  CHECK(found);

  // pod-b leaves (Delta): its flow goes, and its traffic no longer reaches the old port.
  dataplane::v1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(7);
  d.mutable_delta()->set_generation(8);
  d.mutable_delta()->add_delete_ports("pod-b");
  r = f.engine->program(d);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.flows_removed() == 1);
  f.inject(kRepA, local);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("UnknownDestination") == 1);
  // The tunnel flow to node2 is still there and still used.
  f.inject(kRepA, remote);
  CHECK(Fixture::drain(kUplink).size() == 1);

  // node2 leaves: the tunnel flow is invalidated.
  dataplane::v1::ProgramRequest d2;
  d2.mutable_delta()->set_base_generation(8);
  d2.mutable_delta()->set_generation(9);
  d2.mutable_delta()->add_delete_remote_nodes("node2");
  r = f.engine->program(d2);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.flows_removed() >= 1);
  f.inject(kRepA, remote);
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(f.stat("NoRoute") == 1);

  // A pod moving to another representor: its flows follow the new binding.
  dataplane::v1::ProgramRequest d3;
  d3.mutable_delta()->set_base_generation(9);
  d3.mutable_delta()->set_generation(10);
  auto* pb = d3.mutable_delta()->add_upsert_ports();
  *pb = baseModel().ports(1);
  pb->set_representor("pf0vf9");
  REQUIRE(f.engine->program(d3).status() == dataplane::v1::OK);
  REQUIRE(f.engine->bindPort("pf0vf9", env().port[kSpare], PortRole::kRepresentor, MacAddress{kMacB}).ok());
  f.inject(kRepA, local);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(Fixture::drain(kSpare).size() == 1);
}

TEST_CASE("engine: a large flow cache (bucket first, then the matching entries) forwards as a small one", "[engine]") {
  // 4,096 entries stay in the core's caches: a lookup's bucket and preferred
  // way are prefetched together. 262,144 entries (16 MiB) do not: the
  // bucket is prefetched first and the entries its signatures name a few
  // packets later. Bursts mixing every kind of packet — lane (pod IPv4),
  // general (IPv6, ARP), tunnelled (decap, with its cold part) — go through
  // both, three times (misses, then hits), and must leave identically.
  std::vector<Bytes> pod, uplink;
  for (uint16_t i = 0; i < 24; ++i) {
    pod.push_back(udp4(kRouterMac, kMacA, "10.244.1.5", i % 2 ? "10.244.1.6" : "10.244.2.7", 64,
                       static_cast<uint16_t>(2000 + i)));
  }
  pod.push_back(tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9"));
  pod.push_back(tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:1::6"));
  pod.insert(pod.begin() + 7, pod[3]);  // the same flow twice in one burst
  for (uint16_t i = 0; i < 20; ++i) {
    uplink.push_back(fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", i % 2 ? "10.244.1.5" : "10.244.1.6",
                                     63, static_cast<uint16_t>(3000 + i)),
                                10, i % 2 ? 1 : 2));
  }
  struct Run {
    std::vector<std::vector<Bytes>> out;  // per round and port
    uint64_t hits;
  };
  auto run = [&](uint32_t entries) {
    EngineConfig c;
    c.flow_cache_entries = entries;
    Fixture f(c);
    REQUIRE(FlowTable(entries).cacheResident() == (entries <= 4096));
    Run r;
    for (int round = 0; round < 3; ++round) {
      f.inject(kRepA, pod);
      f.inject(kUplink, uplink);
      for (unsigned p = 0; p < kPorts; ++p) r.out.push_back(Fixture::drain(p));
    }
    r.hits = f.stat("FlowHit");
    CHECK(f.stat("FlowMiss") == f.flows().size());
    return r;
  };
  const Run small = run(4096);
  const Run large = run(262144);
  // Every packet of the second and third rounds hit, and one of the first.
  CHECK(small.hits == 2 * (pod.size() + uplink.size()) + 1);
  CHECK(large.hits == small.hits);
  REQUIRE(large.out.size() == small.out.size());
  size_t forwarded = 0;
  for (size_t i = 0; i < small.out.size(); ++i) {
    INFO("round " << i / kPorts << ", port " << i % kPorts);
    CHECK(large.out[i] == small.out[i]);
    forwarded += small.out[i].size();
  }
  CHECK(forwarded == 3 * (pod.size() + uplink.size()));
}

TEST_CASE("engine: flows age out when idle and the LRU way is evicted when a bucket is full", "[engine]") {
  EngineConfig c;
  c.flow_cache_entries = 8;  // one bucket
  c.flow_idle_timeout_ms = 1000;
  Fixture f(c);
  for (uint16_t i = 0; i < 9; ++i) {
    g_clock += 1;
    f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, static_cast<uint16_t>(1000 + i)));
  }
  CHECK(Fixture::drain(kRepB).size() == 9);
  CHECK(f.stat("FlowEvicted") == 1);
  CHECK(f.flows().size() == 8);
  // The evicted one was the oldest (source port 1000): it misses again.
  const uint64_t misses = f.stat("FlowMiss");
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 1008));
  CHECK(f.stat("FlowMiss") == misses);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 1000));
  CHECK(f.stat("FlowMiss") == misses + 1);
  Fixture::drainAll();

  g_clock += 1500;
  f.engine->quiescent(f.engine->worker(0));
  CHECK(f.stat("FlowAged") == 8);
  CHECK(f.flows().empty());
}

TEST_CASE("engine: flows that act alike share one action record, revalidated once per change", "[engine]") {
  Fixture f;
  for (uint16_t i = 0; i < 50; ++i) {
    f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, static_cast<uint16_t>(2000 + i)));
  }
  CHECK(Fixture::drain(kUplink).size() == 50);
  CHECK(f.flows().size() == 50);
  CHECK(f.stat("flow_action_records") == 1);
  for (uint16_t i = 0; i < 20; ++i) {
    f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, static_cast<uint16_t>(2000 + i)));
  }
  CHECK(Fixture::drain(kRepB).size() == 20);
  CHECK(f.stat("flow_action_records") == 2);
  // Every flow keeps its own statistics and source port.
  for (const auto& fl : f.flows()) CHECK(fl.packets() == 1);

  // node2 leaves: its 50 flows are stale through their one record.
  dataplane::v1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(1);
  d.mutable_delta()->set_generation(2);
  d.mutable_delta()->add_delete_remote_nodes("node2");
  auto r = f.engine->program(d);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.flows_removed() == 50);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 2000));
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(f.stat("NoRoute") == 1);
  CHECK(f.stat("FlowInvalidated") == 1);
  // The sweep (a quarter of the 10 s idle timeout covers the table) removes
  // the other 49; the local flows stay, and hit.
  g_clock += 3000;
  f.engine->quiescent(f.engine->worker(0));
  CHECK(f.stat("FlowInvalidated") == 50);
  const uint64_t hits = f.stat("FlowHit");
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 2000));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("FlowHit") == hits + 1);
  // The local flows' record and the NoRoute drop flow's.
  CHECK(f.stat("flow_action_records") == 2);
}

TEST_CASE("engine: with every action record in use, packets are still forwarded, uncached", "[engine]") {
  EngineConfig c;
  c.flow_cache_entries = 8;  // one bucket, four action records
  Fixture f(c);
  // Five different decisions from pod A, then one from pod B.
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));   // local to B
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7"));   // encap to node2
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.99"));  // unknown destination
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "8.8.8.8"));      // no route
  CHECK(f.stat("flow_action_records") == 4);
  CHECK(f.stat("FlowNotCached") == 0);
  f.inject(kRepB, udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5"));   // local to A
  CHECK(f.stat("FlowNotCached") == 1);
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kUplink).size() == 1);
  CHECK(f.flows().size() == 4);
  // Its next packet takes the slow path again, and is forwarded again.
  f.inject(kRepB, udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5"));
  CHECK(f.stat("FlowNotCached") == 2);
  CHECK(Fixture::drain(kRepA).size() == 1);
}

TEST_CASE("engine: the flow cache keeps flows, action records and their index consistent", "[engine]") {
  // Random installs and removals with many distinct action records, checked
  // against a plain model after every step.
  FlowTable t(256);  // 128 action records
  struct Live {
    uint64_t hash;
    FlowRecord rec;
  };
  std::map<uint32_t, Live> live;  // by index
  uint32_t seed = 12345;
  auto rnd = [&seed] {
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
  };
  auto makeRecord = [](uint32_t flow, uint32_t action) {
    FlowRecord r{};
    r.key.in_port = 3;
    r.key.ethertype = overlay::eth::kTypeIpv4;
    r.key.ip_proto = 17;
    r.key.l3_src = {10, 244, 1, 5};
    r.key.l3_dst = {10, 244, 2, static_cast<uint8_t>(flow)};
    r.key.l4_src = static_cast<uint16_t>(flow >> 8);
    r.key.l4_dst = 80;
    r.stamp = 1;
    r.ops = op::kOutput;
    r.out_port = static_cast<uint16_t>(action);  // 400 different decisions
    r.encap_sport = static_cast<uint16_t>(flow * 7);
    return r;
  };
  uint32_t next_id = 0;
  size_t uncached = 0, evictions = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.size() < 220 && rnd() % 3 != 0) {
      const uint32_t flow = next_id++;
      FlowRecord r = makeRecord(flow, rnd() % 400);
      bool is_long = false;
      const CompactKey ck = CompactKey::from(r.key, is_long);
      REQUIRE_FALSE(is_long);
      const uint64_t hash = (uint64_t{rnd()} << 40) ^ (uint64_t{rnd()} << 16) ^ rnd();
      bool evicted = false;
      const uint32_t index = t.insert(hash, r, 1, evicted, kAlwaysValid, kNoResolve);
      if (index == UINT32_MAX) {
        // Every record in use: not cached. A flow evicted for it is gone all the same.
        size_t gone = 0;
        for (auto it = live.begin(); it != live.end();) {
          FlowRecord back{};
          if (t.read(it->first, back)) {
            ++it;
          } else {
            it = live.erase(it);
            ++gone;
          }
        }
        REQUIRE(gone == (evicted ? 1u : 0u));
        ++uncached;
        continue;
      }
      if (evicted) {
        live.erase(index);
        ++evictions;
      }
      live[index] = Live{hash, r};
      REQUIRE(t.lookup<false>(hash, ck, false, r.key, TunnelProbe{}) == index);
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, rnd() % live.size());
      t.remove(it->first);
      live.erase(it);
    }
    // Every live flow is found and reads back whole; records match the
    // distinct decisions in use.
    std::set<uint16_t> decisions;
    for (const auto& [index, l] : live) {
      bool is_long = false;
      const CompactKey ck = CompactKey::from(l.rec.key, is_long);
      REQUIRE(t.lookup<false>(l.hash, ck, false, l.rec.key, TunnelProbe{}) == index);
      FlowRecord back{};
      REQUIRE(t.read(index, back));
      CHECK(back.key == l.rec.key);
      CHECK(back.out_port == l.rec.out_port);
      CHECK(back.encap_sport == l.rec.encap_sport);
      decisions.insert(l.rec.out_port);
    }
    REQUIRE(t.actionsInUse() == decisions.size());
  }
  // Both limits were reached: full buckets and every record in use.
  CHECK(evictions > 0);
  CHECK(uncached > 0);
  for (const auto& [index, l] : live) t.remove(index);
  CHECK(t.actionsInUse() == 0);
}

TEST_CASE("engine: a flow whose bucket is full goes to its second bucket; LRU only when both are full", "[engine]") {
  FlowTable t(256);  // 32 buckets of 8
  auto record = [](uint32_t flow) {
    FlowRecord r{};
    r.key.in_port = 3;
    r.key.ethertype = overlay::eth::kTypeIpv4;
    r.key.ip_proto = 6;
    r.key.l3_src = {10, 244, 1, 5};
    r.key.l3_dst = {10, 244, 2, static_cast<uint8_t>(flow)};
    r.key.l4_dst = 443;
    r.stamp = 1;
    r.ops = op::kOutput;
    r.out_port = 1;
    return r;
  };
  // Same first bucket, second bucket and preferred way; signatures differ.
  auto hashOf = [](uint32_t flow) { return uint64_t{0xa5} << 40 | uint64_t{flow + 1} << 32 | 7u; };
  REQUIRE(t.bucketOf(hashOf(0)) != t.secondBucketOf(hashOf(0)));
  auto find = [&](uint32_t flow) {
    const FlowRecord r = record(flow);
    bool is_long = false;
    return t.lookup<false>(hashOf(flow), CompactKey::from(r.key, is_long), false, r.key, TunnelProbe{});
  };
  std::vector<uint32_t> index;
  for (uint32_t flow = 0; flow < 16; ++flow) {
    bool evicted = true;
    index.push_back(t.insert(hashOf(flow), record(flow), 1 + flow, evicted, kAlwaysValid, kNoResolve));
    CHECK_FALSE(evicted);
    CHECK(index.back() / FlowBucket::kWays == (flow < 8 ? t.bucketOf(hashOf(0)) : t.secondBucketOf(hashOf(0))));
  }
  for (uint32_t flow = 0; flow < 16; ++flow) CHECK(find(flow) == index[flow]);
  // Both full: flow 0 was hit since, so flow 1 is the least recently used of the sixteen.
  FlowTable::touch(t.entry(index[0]), 100);
  bool evicted = false;
  const uint32_t at = t.insert(hashOf(16), record(16), 101, evicted, kAlwaysValid, kNoResolve);
  CHECK(evicted);
  CHECK(at == index[1]);
  CHECK(find(1) == UINT32_MAX);
  CHECK(find(16) == at);
  for (uint32_t flow = 0; flow < 16; ++flow) {
    if (flow != 1) CHECK(find(flow) == index[flow]);
  }
  // A way freed in the second bucket is taken by the next flow of the pair.
  t.remove(index[12]);
  CHECK(find(12) == UINT32_MAX);
  CHECK(t.insert(hashOf(17), record(17), 102, evicted, kAlwaysValid, kNoResolve) == index[12]);
  CHECK_FALSE(evicted);
  CHECK(find(17) == index[12]);
}

TEST_CASE("engine: 100,000 flows in 262,144 entries evict almost none", "[engine]") {
  // With one bucket per flow about 140 buckets would draw more than eight
  // flows (about 190 evictions), and under cyclic traffic LRU would thrash
  // all their flows: about 1 % of packets missing. With two, a full pair is
  // rare (this sequence: one).
  FlowTable t(262144);
  FlowRecord r{};
  r.key.ethertype = overlay::eth::kTypeIpv4;
  r.stamp = 1;
  r.ops = op::kOutput;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  size_t evictions = 0;
  for (uint32_t flow = 0; flow < 100000; ++flow) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t hash = state ^ (state >> 29);
    r.key.l4_src = static_cast<uint16_t>(flow);
    r.key.l4_dst = static_cast<uint16_t>(flow >> 16);
    bool evicted = false;
    REQUIRE(t.insert(hash, r, 1, evicted, kAlwaysValid, kNoResolve) != UINT32_MAX);
    evictions += evicted;
  }
  CHECK(evictions <= 5);
}

TEST_CASE("engine: long keys whose compact folds collide are told apart by the full key", "[engine]") {
  FlowTable t(64);
  FlowRecord a{};
  a.key.ethertype = overlay::eth::kTypeIpv6;
  // l3_src is key bytes 28..43: byte 8 of it is bit 32 of the key's word 4.
  a.key.l3_src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  a.stamp = 1;
  a.ops = op::kOutput;
  a.out_port = 1;
  FlowRecord b = a;
  // Byte 12 of it is bit 0 of word 5, which the fold shifts onto bit 32.
  b.key.l3_src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  b.out_port = 2;
  bool la = false, lb = false;
  const CompactKey ca = CompactKey::from(a.key, la), cb = CompactKey::from(b.key, lb);
  REQUIRE(la);
  REQUIRE(lb);
  REQUIRE(ca == cb);
  bool evicted = false;
  const uint64_t hash = 0x1234;
  const uint32_t ia = t.insert(hash, a, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(ia != UINT32_MAX);
  CHECK(t.lookup<false>(hash, cb, true, b.key, TunnelProbe{}) == UINT32_MAX);
  const uint32_t ib = t.insert(hash, b, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(ib != UINT32_MAX);
  CHECK(ib != ia);
  CHECK(t.lookup<false>(hash, ca, true, a.key, TunnelProbe{}) == ia);
  CHECK(t.lookup<false>(hash, cb, true, b.key, TunnelProbe{}) == ib);
  // And a compact key never matches a long entry with the same 40 bytes.
  CHECK(t.lookup<false>(hash, ca, false, a.key, TunnelProbe{}) == UINT32_MAX);
}

// A flow from an IPv4 tunnel whose key takes the fold (untagged IPv4, a
// 16-bit port) has its tunnel in its hit line (CompactKey::foldTunnel4):
// the uplink's lane hit is one compare, and that compare still tells the
// tunnel apart: the same key under the same hash (a collision the test
// forces) from another remote or with other OVN keys is not that flow,
// nor is the same packet untunnelled. Keys that do not take the fold (an
// IPv6 remote, a tagged or ARP inner frame) match their tunnel in the cold
// part, as before; every flow reads back whole.
TEST_CASE("engine: a tunnel folded into the key is compared whole, and read back", "[engine]") {
  FlowTable t(64);
  FlowRecord r{};
  r.key.in_port = 1;
  r.key.tunnel_id = 10;
  r.key.ethertype = overlay::eth::kTypeIpv4;
  r.key.ip_proto = 17;
  r.key.l3_src = {10, 244, 2, 7};
  r.key.l3_dst = {10, 244, 1, 5};
  r.key.l4_src = 5000;
  r.key.l4_dst = 53;
  r.stamp = 1;
  r.ops = op::kDecap | op::kOutput;
  r.out_port = 3;
  r.tun_family = 4;
  r.tun_remote = {192, 168, 100, 2};
  r.tun_ingress = 0x7fff;
  r.tun_egress = 0xffff;
  bool evicted = false, is_long = false;
  const uint64_t hash = 0x5678;
  const uint32_t index = t.insert(hash, r, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(index != UINT32_MAX);
  const CompactKey plain = CompactKey::from(r.key, is_long);
  REQUIRE_FALSE(is_long);
  uint32_t remote, other_remote;
  const uint8_t other[4] = {192, 168, 100, 3};
  std::memcpy(&remote, r.tun_remote.data(), 4);
  std::memcpy(&other_remote, other, 4);
  auto folded = [&plain](uint32_t rem, uint16_t ingress, uint16_t egress) {
    CompactKey k = plain;
    REQUIRE(k.tryFoldTunnel4(rem, ingress, egress));
    return k;
  };
  const CompactKey key = folded(remote, 0x7fff, 0xffff);
  CHECK(key.folded());
  CHECK(key.tunnelRemote4() == remote);
  CHECK(key.tunnelIngress() == 0x7fff);
  CHECK(key.tunnelEgress() == 0xffff);
  CHECK(key.unfolded() == plain);
  CHECK(key.expand() == r.key);
  const TunnelProbe back_probe = key.tunnelProbe();
  CHECK(back_probe.family == 4);
  CHECK(back_probe.remote == r.tun_remote);
  CHECK(back_probe.ingress == 0x7fff);
  CHECK(back_probe.egress == 0xffff);
  // Folded once only.
  CompactKey again = key;
  CHECK_FALSE(again.tryFoldTunnel4(remote, 1, 2));
  CHECK(again == key);
  CHECK(t.compactHit(index, key));
  CHECK(t.scanCompact(hash, index ^ 1, key) == index);
  // Other tunnels; one whose fields are the unfolded key's own (a zero remote
  // and egress, the ingress key 0x0800 in the ethertype's place: only the
  // fold's mark tells it apart); the key unfolded.
  for (const CompactKey& k : {folded(other_remote, 0x7fff, 0xffff), folded(remote, 0x7ffe, 0xffff),
                              folded(remote, 0x7fff, 0x8000), folded(0, 0x0800, 0), plain}) {
    CHECK_FALSE(t.compactHit(index, k));
    CHECK(t.scanCompact(hash, index ^ 1, k) == UINT32_MAX);
  }
  // The general lookup (a probe besides the key) agrees.
  TunnelProbe probe{};
  probe.family = 4;
  probe.setRemote4(remote);
  probe.ingress = 0x7fff;
  probe.egress = 0xffff;
  CHECK(t.lookup<true>(hash, key, false, FlowTable::kNoFullKey, probe) == index);
  // The flow reads back unfolded, its tunnel in the tunnel fields.
  FlowRecord back{};
  REQUIRE(t.read(index, back));
  CHECK(back.key == r.key);
  CHECK(back.tun_family == 4);
  CHECK(back.tun_remote == r.tun_remote);
  CHECK(back.tun_ingress == 0x7fff);
  CHECK(back.tun_egress == 0xffff);
  t.remove(index);

  // Keys that do not take the fold: their tunnel is compared in the cold part.
  auto unfolded_case = [&](FlowRecord rec, const char* what) {
    INFO(what);
    bool long_key = false;
    CompactKey k = CompactKey::from(rec.key, long_key);
    uint32_t rem;
    std::memcpy(&rem, rec.tun_remote.data(), 4);
    if (!long_key && rec.tun_family == 4) CHECK_FALSE(k.tryFoldTunnel4(rem, rec.tun_ingress, rec.tun_egress));
    const uint32_t at = t.insert(hash, rec, 1, evicted, kAlwaysValid, kNoResolve);
    REQUIRE(at != UINT32_MAX);
    TunnelProbe p{};
    p.family = rec.tun_family;
    p.remote = rec.tun_remote;
    p.ingress = rec.tun_ingress;
    p.egress = rec.tun_egress;
    CHECK(t.lookup<true>(hash, k, long_key, rec.key, p) == at);
    TunnelProbe q = p;
    q.ingress = static_cast<uint16_t>(q.ingress ^ 1);
    CHECK(t.lookup<true>(hash, k, long_key, rec.key, q) == UINT32_MAX);
    // The lane's folded key of the same packet from an IPv4 remote with
    // the same first four bytes is not this flow.
    if (!long_key && rec.tun_family == 6) CHECK_FALSE(t.compactHit(at, folded(rem, rec.tun_ingress, rec.tun_egress)));
    FlowRecord b{};
    REQUIRE(t.read(at, b));
    CHECK(b.key == rec.key);
    CHECK(b.tun_family == rec.tun_family);
    CHECK(b.tun_remote == rec.tun_remote);
    t.remove(at);
  };
  FlowRecord v6 = r;
  v6.tun_family = 6;
  v6.tun_remote = {192, 168, 100, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  unfolded_case(v6, "an IPv6 remote");
  FlowRecord tagged = r;
  tagged.key.vlan_tci[0] = 100;
  tagged.key.flags = overlay::FlowKey::kFlagOuterVlan;
  unfolded_case(tagged, "a tagged inner frame");
  FlowRecord arp = r;
  arp.key.ethertype = overlay::eth::kTypeArp;
  arp.key.ip_proto = 1;
  arp.key.l4_src = arp.key.l4_dst = 0;
  unfolded_case(arp, "ARP");
  FlowRecord wide_port = r;
  wide_port.key.in_port = 0x10000;
  unfolded_case(wide_port, "a port above 16 bits");
}

// A compact key keeps nothing but its 40 bytes, a long one its tail besides:
// both read back as the whole key (dump-flows, offload), and a long key
// differing from a cached one only in its tail (the last byte of the
// destination address, the ports) is another flow.
TEST_CASE("engine: cached flows read back their whole key, compact or long", "[engine]") {
  FlowTable t(64);
  FlowRecord v4{};
  v4.key.in_port = 3;
  v4.key.ethertype = overlay::eth::kTypeIpv4;
  v4.key.ip_proto = 6;
  v4.key.l3_src = {10, 244, 1, 5};
  v4.key.l3_dst = {10, 96, 0, 10};
  v4.key.l4_src = 40000;
  v4.key.l4_dst = 80;
  v4.stamp = 1;
  v4.ops = op::kOutput;
  v4.out_port = 1;
  FlowRecord v6 = v4;
  v6.key.ethertype = overlay::eth::kTypeIpv6;
  v6.key.l3_src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x05};
  v6.key.l3_dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  FlowRecord v6b = v6;
  v6b.key.l3_dst[15] = 0x11;
  v6b.key.l4_dst = 81;
  bool evicted = false;
  const uint32_t i4 = t.insert(0x11, v4, 1, evicted, kAlwaysValid, kNoResolve);
  const uint32_t i6 = t.insert(0x22, v6, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(i4 != UINT32_MAX);
  REQUIRE(i6 != UINT32_MAX);
  FlowRecord out{};
  REQUIRE(t.read(i4, out));
  CHECK(out.key == v4.key);
  REQUIRE(t.read(i6, out));
  CHECK(out.key == v6.key);
  bool l6 = false, l6b = false;
  const CompactKey c6 = CompactKey::from(v6.key, l6), c6b = CompactKey::from(v6b.key, l6b);
  REQUIRE(l6);
  REQUIRE(l6b);
  CHECK(t.lookup<false>(0x22, c6, true, v6.key, TunnelProbe{}) == i6);
  CHECK(t.lookup<false>(0x22, c6b, true, v6b.key, TunnelProbe{}) == UINT32_MAX);
  // Another long key in the same slot replaces the tail with its own.
  t.remove(i6);
  const uint32_t j6 = t.insert(0x22, v6b, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(j6 != UINT32_MAX);
  REQUIRE(t.read(j6, out));
  CHECK(out.key == v6b.key);
  CHECK(t.lookup<false>(0x22, c6, true, v6.key, TunnelProbe{}) == UINT32_MAX);
  CHECK(FlowTable::bytesPerCompactSlot() + sizeof(KeyTail) == FlowTable::bytesPerSlot());
}

TEST_CASE("engine: a stale action record is not shared with new flows", "[engine]") {
  FlowTable t(64);
  FlowRecord r{};
  r.key.ethertype = overlay::eth::kTypeIpv4;
  r.stamp = 1;
  r.ops = op::kOutput;
  r.out_port = 4;
  bool evicted = false;
  const uint32_t i1 = t.insert(1, r, 1, evicted, kAlwaysValid, kNoResolve);
  REQUIRE(i1 != UINT32_MAX);
  // A newer snapshot under which the record's dependencies changed.
  FlowRecord r2 = r;
  r2.key.l4_src = 99;
  r2.stamp = 2;
  const uint32_t i2 = t.insert(2, r2, 1, evicted, [](const FlowActions&) { return false; }, kNoResolve);
  REQUIRE(i2 != UINT32_MAX);
  CHECK(t.entry(i1).actionIndex() != t.entry(i2).actionIndex());
  CHECK(t.actionsInUse() == 2);
  CHECK(t.actionsOf(t.entry(i1)).stamp == 1);
  CHECK(t.actionsOf(t.entry(i2)).stamp == 2);
  // Still valid under the newer snapshot: shared, and its stamp moves on.
  FlowRecord r3 = r2;
  r3.key.l4_src = 100;
  const uint32_t i3 = t.insert(3, r3, 1, evicted, kAlwaysValid, kNoResolve);
  CHECK(t.entry(i3).actionIndex() == t.entry(i2).actionIndex());
  t.remove(i1);
  CHECK(t.actionsInUse() == 1);
}

TEST_CASE("engine: dump-flows, ports and stats", "[engine]") {
  Fixture f;
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7"));
  f.inject(kUplink, fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63)));
  f.inject(kRepA, udp4(kRouterMac, kMacB, "10.244.1.5", "10.244.2.7"));
  Fixture::drainAll();
  g_clock += 250;
  auto flows = f.flows();
  REQUIRE(flows.size() == 3);
  std::string all;
  for (const auto& fl : flows) {
    all += fl.match() + " actions=" + fl.actions() + " status=" + fl.offload_status() + "\n";
    CHECK(fl.packets() == 1);
    CHECK(fl.idle_ms() == 250);
    CHECK_FALSE(fl.in_hw());
  }
  INFO(all);
  CHECK(all.find("geneve_encap(src=192.168.100.1,remote=192.168.100.2,vni=20,ingress=1,egress=32768") !=
        std::string::npos);
  CHECK(all.find("tun_src=192.168.100.2,tun_dst=192.168.100.1,tun_id=10") != std::string::npos);
  CHECK(all.find("geneve_decap(") != std::string::npos);
  CHECK(all.find("drop(PortSecurityMac)") != std::string::npos);
  CHECK(all.find("software: no offload backend") != std::string::npos);

  dataplane::v1::OperatorRequest ports;
  ports.mutable_ports();
  auto pr = f.engine->operate(ports);
  bool saw = false;
  for (const auto& p : pr.ports()) {
    if (p.name() == "pf0vf0") {
      saw = true;
      CHECK(p.role() == "representor");
      CHECK(p.logical_port() == "pod-a");
      CHECK(p.rx_packets() == 2);
      CHECK(p.rx_dropped() == 1);
    }
    if (p.name() == "management") CHECK(p.logical_port() == "mgmt");
  }
  CHECK(saw);
  CHECK(f.stat("FlowInstalled") == 3);
  CHECK(f.engine->bytesPerFlow() <= 256);
}

TEST_CASE("engine: new flows are offloaded off the lcore; refusals stay in software", "[engine]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7"));
  f.inject(kUplink, fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63)));
  Fixture::drainAll();
  auto before = f.flows();
  REQUIRE(before.size() == 3);
  for (const auto& fl : before) CHECK(fl.offload_status() == "software: offload pending");
  f.engine->maintain();  // drains the lcore's queue: validate + install
  std::string all;
  unsigned in_hw = 0;
  for (const auto& fl : f.flows()) {
    all += fl.actions() + " -> " + fl.offload_status() + "\n";
    in_hw += fl.in_hw() ? 1 : 0;
  }
  INFO(all);
  CHECK(in_hw == 3);
  CHECK(eswitch.installedCount() == 3);
  CHECK(f.engine->bytesPerFlow() <= 256);

  // Hardware counters merge into the flow's statistics: the rules are the
  // fake's handles; hit each and every flow shows the sum.
  for (uint64_t id = 0; id < 16; ++id) (void)eswitch.hit(dpu::offload::OffloadHandle{id}, 10, 1000);
  for (const auto& fl : f.flows()) {
    CHECK(fl.packets() == 11);
    CHECK(fl.bytes() > 1000);
  }
  // A refusal keeps the flow in software with the device's reason.
  eswitch.refuseNext("table full (test)");
  f.inject(kRepB, udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5"));
  Fixture::drainAll();
  f.engine->maintain();
  bool refused = false;
  for (const auto& fl : f.flows()) {
    if (fl.match().find("nw_src=10.244.1.6") != std::string::npos) {
      CHECK_FALSE(fl.in_hw());
      CHECK(fl.offload_status() == "software: table full (test)");
      refused = true;
    }
  }
  CHECK(refused);

  // Invalidated flows lose their hardware rule: pod-b leaves.
  dataplane::v1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(1);
  d.mutable_delta()->set_generation(2);
  d.mutable_delta()->add_delete_ports("pod-b");
  REQUIRE(f.engine->program(d).status() == dataplane::v1::OK);
  f.engine->maintain();
  // Left in hardware: pod-a's tunnel flows (encap to node2, decap from it).
  CHECK(eswitch.installedCount() == 2);
}

TEST_CASE("engine: a restrictive eswitch refuses what it cannot do, per flow", "[engine]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::restrictive());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7"));
  f.inject(kRepA, udp4(kRouterMac, kMacB, "10.244.1.5", "10.244.2.7"));  // a spoof drop flow
  Fixture::drainAll();
  f.engine->maintain();
  std::string all;
  for (const auto& fl : f.flows()) all += fl.actions() + " -> " + fl.offload_status() + "\n";
  INFO(all);
  CHECK(all.find("software: fake eswitch (restrictive): action RAW_ENCAP not supported") != std::string::npos);
}

TEST_CASE("engine: the lcore's fast parse agrees with parsePacket + extractFlowKey", "[engine]") {
  std::vector<Bytes> packets = {
      udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"),
      udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 1, 9, 0, true),
      tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9"),
      tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9", 3, 0),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2}).tcp({.src_port = 5, .dst_port = 6}).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2, .options = {1, 1, 1, 0}}).udp(1, 2).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2, .frag_field = 0x2000}).udp(1, 2).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2, .frag_field = 0x0010}).udp(1, 2).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).vlan(7).ipv4({.src = 1, .dst = 2}).udp(1, 2).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2}).icmpEcho(8, 1, 1).build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv6({.src = ip6("::1"), .dst = ip6("::2")}).udp(1, 2).build(),
      PacketBuilder()
          .ethernet(kRouterMac, kMacA)
          .ipv6({.src = ip6("::1"), .dst = ip6("::2")})
          .ipv6Fragment(0, true, 7)
          .udp(1, 2)
          .build(),
      PacketBuilder().ethernet(kRouterMac, kMacA).arp(1, kMacA, 1, {}, 2).build(),
  };
  // Every truncation and a few corruptions of each, too.
  std::vector<Bytes> all;
  for (const auto& p : packets) {
    for (size_t len = 0; len <= p.size(); ++len) all.emplace_back(p.begin(), p.begin() + len);
    for (size_t at : {14u, 16u, 17u, 38u, 46u, 54u, 58u}) {
      if (at >= p.size()) continue;
      for (uint8_t v : {0x00, 0x05, 0x45, 0x46, 0x60, 0xff}) {
        Bytes c = p;
        c[at] = v;
        all.push_back(c);
      }
    }
    Bytes padded = p;
    padded.resize(p.size() + 10, 0);
    all.push_back(padded);
  }
  size_t fast = 0;
  for (const auto& frame : all) {
    overlay::ParsedPacket pf, pg;
    overlay::FlowKey kf;
    CompactKey cf;
    bool long_f = false;
    const bool took = fastParse(frame, pf, kf, cf, long_f, 7, 99);
    const overlay::Status st = overlay::parsePacket(frame, pg);
    INFO(dpu::test::toHex(frame.data(), frame.size()));
    if (!took) continue;
    ++fast;
    REQUIRE(st == overlay::Status::kOk);
    const overlay::FlowKey kg = overlay::extractFlowKey(frame, pg, 7, 99);
    CHECK(kf == kg);
    CHECK(std::memcmp(&pf, &pg, sizeof pf) == 0);
    // The compact key: the general one's, lossless (and expanding to it)
    // exactly when the key has IPv4 or no addresses.
    bool long_g = false;
    const CompactKey cg = CompactKey::from(kg, long_g);
    CHECK(cf == cg);
    CHECK(long_f == long_g);
    CHECK(long_g == (pg.l3 == overlay::L3Type::kIpv6));
    if (!long_g) CHECK(cg.expand() == kg);
    // The hit path's variant: the same decision and compact key (the full
    // key only when long), and the fields the compiled actions read; the
    // miss path completes the rest.
    overlay::ParsedPacket ph;
    overlay::FlowKey kh;
    CompactKey ch;
    bool long_h = false;
    REQUIRE(fastParse<false>(frame, ph, kh, ch, long_h, 7, 99));
    CHECK(ch == cg);
    CHECK(long_h == long_g);
    if (long_h) CHECK(kh == kg);
    CHECK(ph.l3 == pg.l3);
    CHECK(ph.l3_offset == pg.l3_offset);
    CHECK(ph.l3_end == pg.l3_end);
  }
  // The fast lane's parse takes exactly the IPv4 packets the fast parse
  // takes, with the same compact key and end of the IP packet.
  size_t lane = 0;
  for (const auto& frame : all) {
    overlay::ParsedPacket pf;
    overlay::FlowKey kf;
    CompactKey cf, cl;
    bool long_f = false;
    uint16_t ip_len = 0;
    const bool took = fastParse(frame, pf, kf, cf, long_f, 7, 0);
    const bool v4 = took && pf.l3 == overlay::L3Type::kIpv4;
    INFO(dpu::test::toHex(frame.data(), frame.size()));
    REQUIRE(laneParse(frame.data(), static_cast<uint32_t>(frame.size()), 7, cl, ip_len) == v4);
    // The scalar form (CPUs without a byte shuffle) agrees with it.
    CompactKey cs;
    uint16_t ip_len_s = 0;
    REQUIRE(laneParse<false>(frame.data(), static_cast<uint32_t>(frame.size()), 7, cs, ip_len_s) == v4);
    if (!v4) continue;
    ++lane;
    CHECK(cl == cf);
    CHECK(cs == cf);
    CHECK(14u + ip_len == pf.l3_end);
    CHECK(14u + ip_len_s == pf.l3_end);
    CHECK(pf.l3_offset == 14);
  }
  CHECK(lane > 10);
  for (const auto& frame : all) {
    overlay::ParsedPacket p1, p2;
    overlay::FlowKey k1, k2;
    CompactKey c1, c2;
    bool l1 = false, l2 = false;
    CHECK(fastParse<false>(frame, p1, k1, c1, l1, 7, 99) == fastParse<true>(frame, p2, k2, c2, l2, 7, 99));
  }
  CHECK(fast > 20);
}

TEST_CASE("engine: the uplink's lane takes only what the general decap takes, with the same key", "[engine]") {
  const Bytes inner4 = udp4(kRouterMac, kMacA, "10.244.2.7", "10.244.1.5");
  const Bytes tcp_inner =
      PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2}).tcp({.src_port = 5, .dst_port = 6}).build();
  // A second, non-critical option (class 0x0103, type 1, no data) before
  // the OVN one: the general decap takes it, the lane leaves it.
  Bytes two_options = fromRemote(inner4);
  two_options.insert(two_options.begin() + 50, {0x01, 0x03, 0x01, 0x00});
  two_options[42] = 0x03;
  overlay::store16(two_options.data() + 16, static_cast<uint16_t>(overlay::load16(two_options.data() + 16) + 4));
  overlay::store16(two_options.data() + 38, static_cast<uint16_t>(overlay::load16(two_options.data() + 38) + 4));
  overlay::store16(two_options.data() + 24, 0);
  overlay::store16(two_options.data() + 24, overlay::ipv4HeaderChecksum(two_options.data() + 14, 20));
  std::vector<Bytes> packets = {
      fromRemote(inner4),
      fromRemote(tcp_inner, 0xabcdef, 0x7fff, 0xffff),
      two_options,
      fromRemote(tcp6(kRouterMac, kMacA, "fd00:10:244:2::9", "fd00:10:244:1::5")),
      fromRemote(PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = 1, .dst = 2, .options = {1, 1, 1, 0}})
                     .udp(1, 2)
                     .build()),
      fromRemote(inner4, 10, 9, 0x8000, "192.168.100.2", "192.168.100.9"),
      geneve(inner4, kNextHopMac, kUplinkMac, "fd00::2", "fd00::1", 10, 9, 1, 77),
  };
  std::vector<Bytes> all;
  for (const auto& p : packets) {
    all.push_back(p);
    for (size_t len = 0; len < p.size(); ++len) all.emplace_back(p.begin(), p.begin() + len);
    // Every header byte, flipped three ways.
    for (size_t at = 0; at < std::min<size_t>(p.size(), kTunnelLaneOuterLen + 42); ++at) {
      for (uint8_t x : {0x01, 0x40, 0xff}) {
        Bytes c = p;
        c[at] ^= x;
        all.push_back(c);
      }
    }
    Bytes padded = p;  // Ethernet padding after the outer IP packet
    padded.resize(p.size() + 10, 0xee);
    all.push_back(padded);
    Bytes with_csum = p;  // a UDP checksum to verify
    if (with_csum.size() > 41) with_csum[41] = 1;
    all.push_back(with_csum);
  }
  const std::array<uint8_t, 16> tunnel_ip{192, 168, 100, 1};
  uint32_t tunnel_ip4;
  std::memcpy(&tunnel_ip4, tunnel_ip.data(), 4);
  size_t taken = 0, left = 0;
  for (const auto& frame : all) {
    for (const auto& [ip_ok, udp_ok] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
      INFO(dpu::test::toHex(frame.data(), frame.size()) << " ip_ok " << ip_ok << " udp_ok " << udp_ok);
      CompactKey key{};
      TunnelLanePacket t{};
      const bool lane = tunnelLaneParse(frame.data(), static_cast<uint32_t>(frame.size()), tunnel_ip4, ip_ok, udp_ok,
                                        7, key, t);
      const GeneralDecap g = generalDecap(frame, tunnel_ip, ip_ok, udp_ok, 7);
      if (!lane) {
        left += g.took;
        continue;
      }
      ++taken;
      REQUIRE(g.took);
      CHECK(g.inner_offset == kTunnelLaneOuterLen);
      CHECK(key == g.key);
      CHECK(key.folded());
      CHECK(key.tunnelRemote4() == g.remote);
      CHECK(key.tunnelIngress() == g.ingress);
      CHECK(key.tunnelEgress() == g.egress);
      CHECK(key.expand() == g.full);
      CHECK(t.inner_len == g.lane.inner_len);
      CHECK(t.ip_len == g.lane.ip_len);
    }
  }
  // The lane takes the common packets (and the flips that change only what
  // it carries); it may leave others to the general decap (the two-option
  // packet), never take more.
  CHECK(taken > 300);
  CHECK(left > 0);
}

TEST_CASE("engine: both TTL decrements update the checksum as RFC 1624 does, for every checksum", "[engine]") {
  size_t mismatches = 0;
  for (uint32_t checksum = 0; checksum <= 0xffff; ++checksum) {
    for (uint8_t ttl : {2, 3, 64, 128, 255}) {
      for (uint8_t proto : {0, 1, 6, 17, 255}) {
        uint8_t ip[20] = {0x45};
        ip[8] = ttl;
        ip[9] = proto;
        overlay::store16(ip + 10, static_cast<uint16_t>(checksum));
        const uint16_t old_word = overlay::load16(ip + 8);
        const uint16_t want =
            overlay::checksumUpdate16(static_cast<uint16_t>(checksum), old_word, static_cast<uint16_t>(old_word - 0x0100));
        uint8_t live[20];
        std::memcpy(live, ip, sizeof live);
        decrementIpv4Ttl(ip);
        if (ip[8] != ttl - 1 || overlay::load16(ip + 10) != want) ++mismatches;
        // The hit path's form, one add for all but two checksums, agrees byte for byte.
        if (!decrementLiveIpv4Ttl(live) || std::memcmp(live, ip, sizeof live) != 0) ++mismatches;
      }
    }
  }
  CHECK(mismatches == 0);
  // A TTL of 0 or 1 is left alone, whatever the checksum.
  for (uint32_t checksum : {0u, 0x1234u, 0xfffeu, 0xffffu}) {
    for (uint8_t ttl : {0, 1}) {
      uint8_t ip[20] = {0x45};
      ip[8] = ttl;
      ip[9] = 17;
      overlay::store16(ip + 10, static_cast<uint16_t>(checksum));
      uint8_t before[20];
      std::memcpy(before, ip, sizeof ip);
      CHECK_FALSE(decrementLiveIpv4Ttl(ip));
      CHECK(std::memcmp(before, ip, sizeof ip) == 0);
    }
  }
}

TEST_CASE("engine: every path matches scapy's golden packets byte for byte", "[engine]") {
  const std::string file = "tests/dpu-agent/datapath/golden/engine.golden";
  struct Case {
    const char* name;
    unsigned in_port;
    unsigned out_port;
  };
  // The generator assumes these ports' ids.
  REQUIRE(env().port[kUplink] == 0);
  REQUIRE(env().port[kRepA] == 2);
  const Case cases[] = {{"local", kRepA, kRepB},         {"encap", kRepA, kUplink},
                        {"decap", kUplink, kRepA},       {"arp", kRepA, kRepA},
                        {"fragneeded", kRepA, kRepA},    {"packettoobig", kRepA, kRepA}};
  Fixture f;
  for (const auto& c : cases) {
    INFO(c.name);
    const Bytes in = dpu::test::golden(file, std::string(c.name) + "_in");
    const Bytes expected = dpu::test::golden(file, std::string(c.name) + "_out");
    for (int round = 0; round < 2; ++round) {  // the slow path, then the cached flow
      f.inject(c.in_port, in);
      auto out = Fixture::drain(c.out_port);
      REQUIRE(out.size() == 1);
      CHECK(dpu::test::toHex(out[0]) == dpu::test::toHex(expected));
      for (unsigned p = 0; p < kPorts; ++p) CHECK(Fixture::drain(p).empty());
    }
  }
}

TEST_CASE("engine: flows the lcore could not queue are offered by the periodic scan", "[engine]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  c.offload_queue = 1;
  Fixture f(c);
  f.inject(kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 1),
                   udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 2),
                   udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, 3)});
  Fixture::drainAll();
  CHECK(f.stat("OffloadQueueFull") == 2);
  f.engine->maintain();
  CHECK(eswitch.installedCount() == 1);
  for (int i = 0; i < 10; ++i) f.engine->maintain();
  CHECK(eswitch.installedCount() == 3);
  // Aged flows take their rules with them (hardware idle too: the fake's counters do not move).
  g_clock += 20000;
  for (int i = 0; i < 64; ++i) {
    g_clock += 1;
    f.engine->quiescent(f.engine->worker(0));
  }
  CHECK(f.stat("FlowAged") == 3);
  f.engine->maintain();
  CHECK(eswitch.installedCount() == 0);
}

TEST_CASE("engine: the no-offload backend is the same as none", "[engine]") {
  dpu::offload::NoOffloadBackend none;
  EngineConfig c;
  c.offload = &none;
  Fixture f(c);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
  Fixture::drainAll();
  f.engine->maintain();
  auto flows = f.flows();
  REQUIRE(flows.size() == 1);
  CHECK(flows[0].offload_status() == "software: no offload backend");
  EngineConfig plain;
  Fixture g(plain);
  CHECK(f.engine->bytesPerFlow() == g.engine->bytesPerFlow());
}

TEST_CASE("engine: two workers, each with its own flow cache and tx queue; counters sum", "[engine]") {
  EngineConfig c;
  c.workers = 2;
  Fixture f(c);
  const Bytes p = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6");
  f.inject(kRepA, p, 0);
  f.inject(kRepA, {p, p}, 1);
  CHECK(Fixture::drain(kRepB, 0).size() == 1);
  CHECK(Fixture::drain(kRepB, 1).size() == 2);
  CHECK(f.stat("FlowMiss") == 2);  // one per worker's cache
  CHECK(f.stat("FlowHit") == 1);
  auto flows = f.flows();
  REQUIRE(flows.size() == 2);
  CHECK(flows[0].packets() + flows[1].packets() == 3);
  // A model change reaches both: pod-b leaves, neither worker forwards to it.
  dataplane::v1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(1);
  d.mutable_delta()->set_generation(2);
  d.mutable_delta()->add_delete_ports("pod-b");
  auto r = f.engine->program(d);
  REQUIRE(r.status() == dataplane::v1::OK);
  CHECK(r.flows_removed() == 2);
  f.inject(kRepA, p, 0);
  f.inject(kRepA, p, 1);
  Fixture::drainAll();
  CHECK(f.stat("UnknownDestination") == 2);
  // The old snapshot is reclaimed once both workers passed a quiescent state.
  f.engine->maintain();
}

TEST_CASE("engine: an IPv6 underlay encapsulates with the UDP checksum and decapsulates", "[engine]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  m.mutable_node()->set_tunnel_ip("2001:db8::1");
  m.mutable_remote_nodes(0)->set_tunnel_ip("2001:db8::2");
  REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse("2001:db8::2").value(), MacAddress{kNextHopMac}).ok());
  auto r = fullSync(*f.engine, m, 3);
  INFO(r.message());
  REQUIRE(r.status() == dataplane::v1::OK);
  const Bytes in = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
  f.inject(kRepA, in);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  const Bytes expected = geneve(udp4(kRouterMac, kRouterMac, "10.244.1.5", "10.244.2.7", 63), kUplinkMac,
                                kNextHopMac, "2001:db8::1", "2001:db8::2", 20, 1, 0x8000,
                                innerHash(in, env().port[kRepA]));
  CHECK(dpu::test::toHex(out[0]) == dpu::test::toHex(expected));
  // IPv6 underlay: the inner MTU is smaller (40-byte outer header): 1500 - 40 - 8 - 8 - 8 - 14 = 1422 > 1400.
  const Bytes inner = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);
  f.inject(kUplink, geneve(inner, kNextHopMac, kUplinkMac, "2001:db8::2", "2001:db8::1", 10, 9, 0x8000, 5));
  auto delivered = Fixture::drain(kRepA);
  REQUIRE(delivered.size() == 1);
  CHECK(delivered[0] == udp4(kMacA, kRouterMac, "10.244.2.7", "10.244.1.5", 63));
  // A mixed-family remote node is refused, the rest stays programmed.
  m.mutable_remote_nodes(0)->set_tunnel_ip("192.168.100.2");
  r = fullSync(*f.engine, m, 4);
  REQUIRE(r.status() == dataplane::v1::OK);
  REQUIRE(r.problems_size() == 1);
  CHECK_THAT(r.problems(0).reason(), Catch::Contains("is not of the same IP family as ours"));
  CHECK(f.engine->wantedTunnelPeers().empty());
}

// The lanes (actions.def) against the general routine (runLaneScenarios,
// engine_fixture.h): every kind of flow the slow path makes, each packet
// sent three times (the miss, then two hits), through an engine with the
// lanes on and one with them off. What every port sends and every counter
// must be the same, byte for byte; and the lanes must have been taken (the
// action records' kinds), or the test would prove nothing. The ESP lane is
// taken with IPsec on (engine_ipsec_test.cpp).

TEST_CASE("engine: every lane sends what the general routine sends, for every kind of flow", "[engine][lanes]") {
  auto m = baseModel();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  addRemoteNode(m, "node3", "192.168.100.3", "10.244.3.0/24", 30);  // no next hop: the general encap
  // Services (UDP, so their flows are cached from the first packet): one
  // backend here, one on node2; the NAT lanes.
  for (auto [name, vip, backend, local] : {std::tuple{"default/here", "10.96.0.10", "10.244.1.6", true},
                                          std::tuple{"default/there", "10.96.0.20", "10.244.2.7", false}}) {
    auto* s = m.add_services();
    s->set_name(name);
    s->add_cluster_ips(vip);
    auto* p = s->add_ports();
    p->set_protocol(dataplane::v1::UDP);
    p->set_port(53);
    auto* b = p->add_backends();
    b->set_ip(backend);
    b->set_port(5353);
    b->set_local(local);
    b->set_ready(true);
    b->set_serving(true);
  }
  auto tagged = [](Bytes frame, uint16_t vlan) {
    frame.insert(frame.begin() + 12, {0x81, 0x00, static_cast<uint8_t>(vlan >> 8), static_cast<uint8_t>(vlan)});
    return frame;
  };
  auto withOptions = [](const char* from, const char* to) {
    const Bytes f = udp4(kRouterMac, kMacA, from, to);
    // An IPv4 header with one 4-byte option (NOP, NOP, NOP, end): not the lanes' shape.
    Bytes out;
    out.reserve(f.size() + 4);
    for (size_t i = 0; i < f.size(); ++i) {
      if (i == 34) {
        for (uint8_t b : {1, 1, 1, 0}) out.push_back(b);
      }
      out.push_back(f[i]);
    }
    uint8_t* ip = out.data() + 14;
    ip[0] = 0x46;
    overlay::ipv4::setTotalLength(ip, static_cast<uint16_t>(out.size() - 14));
    overlay::ipv4::setChecksum(ip, 0);
    overlay::ipv4::setChecksum(ip, overlay::ipv4HeaderChecksum(ip, 24));
    return out;
  };
  auto tcp4 = [](const char* from, const char* to, uint8_t ttl) {
    return PacketBuilder()
        .ethernet(kRouterMac, kMacA)
        .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl})
        .tcp({.src_port = 40000, .dst_port = 443})
        .payload(Bytes(30, 0x11))
        .build();
  };
  const std::vector<std::pair<unsigned, std::vector<Bytes>>> scenarios = {
      // Route4: pod to pod on this node, UDP and TCP; a TTL that expires on the hit.
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"), tcp4("10.244.1.5", "10.244.1.6", 9)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 1, 999)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 2, 998)}},
      // Pod to the management port and back.
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.2")}},
      {kMgmt, {udp4(kRouterMac, kMacMgmt, "10.244.1.2", "10.244.1.5")}},
      // Not the lanes' shape: IPv4 options, a VLAN tag, IPv6.
      {kRepA, {withOptions("10.244.1.5", "10.244.1.6"), withOptions("10.244.1.5", "10.244.2.7")}},
      {kRepA, {tagged(udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"), 7)}},
      {kRepA, {tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:1::6"),
               tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:1::6", 1)}},
      // Encap4: to a remote pod; DF too big (frag needed), not DF too big; TTL 1.
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7"), tcp4("10.244.1.5", "10.244.2.8", 64)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1300, 1380, true)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1301, 1380, false)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 1, 1302)}},
      // The general encap: IPv6 inner; a peer whose next hop is unknown.
      {kRepA, {tcp6(kRouterMac, kMacA, "fd00:10:244:1::5", "fd00:10:244:2::9")}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.3.9")}},
      // Decap: from a remote pod, IPv4 and IPv6 inside, egress key of the port or the router's.
      {kUplink, {fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63)),
                 fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.6", 63), 10, 9, 2)}},
      {kUplink, {fromRemote(tcp6(kRouterMac, kRemotePodMac, "fd00:10:244:2::7", "fd00:10:244:1::5", 63))}},
      // Cached drops: a spoofed source, no route, multicast; a packet too big for one mbuf's frame.
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.99", "10.244.1.6"), udp4(kRouterMac, kMacA, "10.244.1.5", "10.99.0.1"),
               udp4(overlay::MacAddress{0x01, 0, 0x5e, 0, 0, 1}, kMacA, "10.244.1.5", "224.0.0.1")}},
      {kUplink, {fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.3.7", "10.244.1.5", 63))}},
      // NAT: to a service's local and remote backend, and both replies back.
      {kRepA, {PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = ip4("10.244.1.5"), .dst = ip4("10.96.0.10")})
                   .udp(4000, 53).payload(Bytes(20, 1)).build(),
               PacketBuilder().ethernet(kRouterMac, kMacA).ipv4({.src = ip4("10.244.1.5"), .dst = ip4("10.96.0.20")})
                   .udp(4001, 53).payload(Bytes(20, 2)).build()}},
      {kRepB, {PacketBuilder().ethernet(kRouterMac, kMacB).ipv4({.src = ip4("10.244.1.6"), .dst = ip4("10.244.1.5")})
                   .udp(5353, 4000).payload(Bytes(20, 3)).build()}},
      {kUplink, {fromRemote(PacketBuilder().ethernet(kRouterMac, kRemotePodMac)
                                .ipv4({.src = ip4("10.244.2.7"), .dst = ip4("10.244.1.5"), .ttl = 63})
                                .udp(5353, 4001).payload(Bytes(20, 4)).build(),
                            10, 9, 1)}},
  };
  const LaneRun on = runLaneScenarios(true, scenarios, m);
  const LaneRun off = runLaneScenarios(false, scenarios, m);
  REQUIRE(on.sent.size() == scenarios.size());
  checkLanesAgree(on, off);
  CHECK(on.counters.at("FlowHit") > 0);
  // The lanes ran, and only with the lanes on.
  for (const Lane& lane : kLanes) {
    if (lane.ops & op::kEsp) continue;
    INFO("lane kind " << int(lane.kind));
    CHECK(on.kinds.count(lane.kind) == 1);
  }
  CHECK(on.kinds.count(kActionsGeneral) == 1);
}

// The port limit: every table the engine indexes by port id follows kMaxPorts
// (RTE_MAX_ETHPORTS, or DPU_MAX_PORTS in the build of these tests with 256).

TEST_CASE("engine: port ids up to the engine's limit bind, beyond it they are refused", "[engine][ports]") {
  EngineConfig config;
  config.clock_ms = testClock;
  auto created = Engine::create(config);
  REQUIRE(created.ok());
  Engine& engine = **created;
  if constexpr (kMaxPorts < 65536) {
    auto refused = engine.bindPort("pf0vf9", static_cast<uint16_t>(kMaxPorts), PortRole::kRepresentor, MacAddress{kMacA});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.code() == ErrorCode::kExhausted);
    CHECK_THAT(refused.error(), Catch::Contains("beyond the engine's " + std::to_string(kMaxPorts) + " ports"));
  }
  CHECK(engine.bindPort("pf0vf9", static_cast<uint16_t>(kMaxPorts - 1), PortRole::kRepresentor, MacAddress{kMacA}).ok());
  dataplane::v1::OperatorRequest ports;
  ports.mutable_ports();
  auto listed = engine.operate(ports);
  REQUIRE(listed.ports_size() == 1);
  CHECK(listed.ports(0).dpdk_port() == kMaxPorts - 1);
}

TEST_CASE("engine: pods on ports across the whole port range each receive and send", "[engine][ports]") {
  // One pod per engine port id that stands for a ring port: the five ring
  // ports themselves with Debian's 32 ports; 40 ids spread over all four
  // words of the port bitset when built with 256.
  struct Pod {
    uint16_t id;
    unsigned ring;
    overlay::MacAddress mac;
    std::string ip;
  };
  std::vector<Pod> pods;
  for (unsigned id = 0; id < kMaxPorts && pods.size() < 64; ++id) {
    for (unsigned ring = 0; ring < kPorts; ++ring) {
      if (env().ethdev[ring] != ethdevOf(static_cast<uint16_t>(id))) continue;
      const unsigned n = static_cast<unsigned>(pods.size());
      overlay::MacAddress m = mac("0a:58:0a:f4:01:00");
      m[5] = static_cast<uint8_t>(10 + n);
      pods.push_back({static_cast<uint16_t>(id), ring, m, "10.244.1." + std::to_string(10 + n)});
    }
  }
  if (kMaxPorts > RTE_MAX_ETHPORTS) {
    CHECK(pods.size() == 40);
    CHECK(pods.back().id >= 192);  // the last word of the bitset
  }
  Fixture::drainAll();
  EngineConfig config;
  config.clock_ms = testClock;
  config.miss_budget = 64;  // every pod's first packet is a miss in the same iteration
  auto created = Engine::create(config);
  REQUIRE(created.ok());
  Engine& engine = **created;
  dataplane::v1::LogicalModel m = baseModel();
  m.clear_ports();
  for (size_t i = 0; i < pods.size(); ++i) {
    const std::string rep = "rep" + std::to_string(i);
    REQUIRE(engine.bindPort(rep, pods[i].id, PortRole::kRepresentor, MacAddress{pods[i].mac}).ok());
    auto* p = m.add_ports();
    p->set_name("pod" + std::to_string(i));
    p->set_key(static_cast<uint32_t>(i + 1));
    p->set_kind(dataplane::v1::POD);
    p->set_representor(rep);
    p->set_mac(MacAddress{pods[i].mac}.str());
    p->add_ips(pods[i].ip);
    p->set_datapath_key(10);
  }
  auto programmed = fullSync(engine, m, 1);
  INFO(programmed.message());
  REQUIRE(programmed.status() == dataplane::v1::OK);

  WorkerContext& w = engine.worker(0);
  for (int round = 0; round < 2; ++round) {  // the slow path, then the cached flows
    INFO("round " << round);
    // Every pod sends to the next one before a single flush: every port has a
    // packet pending at once.
    for (size_t i = 0; i < pods.size(); ++i) {
      const Pod& to = pods[(i + 1) % pods.size()];
      const Bytes frame = udp4(kRouterMac, pods[i].mac, pods[i].ip.c_str(), to.ip.c_str());
      rte_mbuf* mbuf = rte_pktmbuf_alloc(env().pool);
      REQUIRE(mbuf != nullptr);
      std::memcpy(rte_pktmbuf_append(mbuf, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
      engine.processBurst(w, pods[i].id, &mbuf, 1);
    }
    engine.flush(w);
    engine.quiescent(w);
    std::map<unsigned, std::multiset<std::string>> got;  // hex frames by ring port
    for (unsigned ring = 0; ring < kPorts; ++ring) {
      for (auto& frame : Fixture::drain(ring)) got[ring].insert(dpu::test::toHex(frame));
    }
    size_t delivered = 0;
    for (size_t i = 0; i < pods.size(); ++i) {
      const Pod& to = pods[(i + 1) % pods.size()];
      const std::string expected = dpu::test::toHex(udp4(to.mac, kRouterMac, pods[i].ip.c_str(), to.ip.c_str(), 63));
      INFO("pod " << i << " (port " << pods[i].id << ") to port " << to.id);
      CHECK(got[to.ring].count(expected) == 1);
      delivered += got[to.ring].count(expected);
    }
    CHECK(delivered == pods.size());
  }
  // Each port's counters are its own, whatever ethdev carries it.
  dataplane::v1::OperatorRequest ports;
  ports.mutable_ports();
  auto listed = engine.operate(ports);
  REQUIRE(listed.ports_size() == static_cast<int>(pods.size()));
  for (const auto& p : listed.ports()) {
    INFO(p.name() << " on port " << p.dpdk_port());
    CHECK(p.rx_packets() == 2);
    CHECK(p.tx_packets() == 2);
    CHECK(p.state() == "up");
  }
  engine.maintain();
}

// The slow-path budget (EngineConfig::miss_budget) ----------------------------

namespace {

// Pod A's (or B's) UDP to the other pod from source port `sport`: a new flow per port.
Bytes aToB(uint16_t sport) { return udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 64, sport); }
Bytes bToA(uint16_t sport) { return udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 64, sport); }

std::vector<Bytes> newFlows(Bytes (*make)(uint16_t), uint16_t first, unsigned n) {
  std::vector<Bytes> out;
  for (unsigned i = 0; i < n; ++i) out.push_back(make(static_cast<uint16_t>(first + i)));
  return out;
}

// A burst processed without ending the poll iteration (no quiescent()), as
// the lcore loop does for each of its ports before it flushes.
void burstOnly(Engine& engine, unsigned port, const std::vector<Bytes>& packets) {
  std::vector<rte_mbuf*> mbufs;
  for (const auto& p : packets) {
    rte_mbuf* m = rte_pktmbuf_alloc(env().pool);
    REQUIRE(m != nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(p.size())), p.data(), p.size());
    mbufs.push_back(m);
  }
  engine.processBurst(engine.worker(0), env().port[port], mbufs.data(), static_cast<uint16_t>(mbufs.size()));
}

dataplane::v1::PortInfo portInfo(Engine& engine, const std::string& name) {
  dataplane::v1::OperatorRequest req;
  req.mutable_ports();
  const auto reply = engine.operate(req);
  for (const auto& p : reply.ports())
    if (p.name() == name) return p;
  FAIL("no port " << name);
  return {};
}

}  // namespace

TEST_CASE("engine: misses over the budget are dropped and counted; established flows still forward", "[engine][miss]") {
  EngineConfig config;
  config.miss_budget = 8;
  Fixture f(config);
  f.inject(kRepA, aToB(1000));  // the established flow
  REQUIRE(Fixture::drain(kRepB).size() == 1);
  REQUIRE(f.flows().size() == 1);

  // One burst: 12 new flows with the established flow's packets among them.
  std::vector<Bytes> burst = newFlows(aToB, 2000, 12);
  burst.insert(burst.begin(), aToB(1000));
  burst.insert(burst.begin() + 7, aToB(1000));
  burst.push_back(aToB(1000));
  f.inject(kRepA, burst);
  CHECK(Fixture::drain(kRepB).size() == 3 + 8);
  CHECK(f.flows().size() == 1 + 8);
  CHECK(f.stat("MissBudget") == 4);
  CHECK(f.stat("FlowInstalled") == 1 + 8);
  CHECK(f.stat("FlowMiss") == 1 + 8);  // a miss over the budget does not run the slow path
  auto a = portInfo(*f.engine, "pf0vf0");
  CHECK(a.miss_budget_dropped() == 4);
  CHECK(a.rx_dropped() == 4);
  CHECK(portInfo(*f.engine, "pf0vf1").miss_budget_dropped() == 0);
  unsigned established = 0;
  for (const auto& fl : f.flows()) {
    if (fl.match().find("tp_src=1000,") == std::string::npos) continue;
    ++established;
    CHECK(fl.packets() == 4);
  }
  CHECK(established == 1);

  // The next iteration has budget again: the four dropped flows install.
  f.inject(kRepA, newFlows(aToB, 2008, 4));
  CHECK(Fixture::drain(kRepB).size() == 4);
  CHECK(f.flows().size() == 1 + 12);
  CHECK(f.stat("MissBudget") == 4);
  CHECK(portInfo(*f.engine, "pf0vf0").miss_budget_dropped() == 4);
}

TEST_CASE("engine: a port flooding new flows leaves another port its share of the budget", "[engine][miss]") {
  EngineConfig config;
  config.miss_budget = 8;
  Fixture f(config);
  Engine& e = *f.engine;
  // Iteration 1: A comes first and takes the whole budget; B is counted as
  // missing, so from the next iteration the two share it.
  burstOnly(e, kRepA, newFlows(aToB, 3000, 16));
  burstOnly(e, kRepB, newFlows(bToA, 4000, 4));
  e.flush(e.worker(0));
  e.quiescent(e.worker(0));
  CHECK(Fixture::drain(kRepB).size() == 8);
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(portInfo(e, "pf0vf0").miss_budget_dropped() == 8);
  CHECK(portInfo(e, "pf0vf1").miss_budget_dropped() == 4);
  // Iteration 2: A still floods, first again, but takes only its half.
  burstOnly(e, kRepA, newFlows(aToB, 3016, 16));
  burstOnly(e, kRepB, newFlows(bToA, 4000, 4));
  e.flush(e.worker(0));
  e.quiescent(e.worker(0));
  CHECK(Fixture::drain(kRepB).size() == 4);
  CHECK(Fixture::drain(kRepA).size() == 4);
  CHECK(portInfo(e, "pf0vf0").miss_budget_dropped() == 8 + 12);
  CHECK(portInfo(e, "pf0vf1").miss_budget_dropped() == 4);
  CHECK(f.stat("MissBudget") == 8 + 4 + 12);
  CHECK(f.flows().size() == 8 + 4 + 4);
  // B's flows are cached now: B's packets hit while A keeps flooding.
  burstOnly(e, kRepA, newFlows(aToB, 3032, 16));
  burstOnly(e, kRepB, newFlows(bToA, 4000, 4));
  e.flush(e.worker(0));
  e.quiescent(e.worker(0));
  CHECK(Fixture::drain(kRepA).size() == 4);
  CHECK(Fixture::drain(kRepB).size() == 4);  // A's half (B did not miss this time)
  CHECK(portInfo(e, "pf0vf1").miss_budget_dropped() == 4);
}

// The cycle share and the receive bursts (miss_budget.h) ----------------------

namespace {

// The synthetic costs the loop below charges the cycle counter: 32 hits of
// pod A's established flow, and each slow-path run.
constexpr uint64_t kHitBurstCycles = 32 * 60;
constexpr uint64_t kRunCycles = 2000;

uint64_t runsSoFar(Engine& e) { return e.worker(0).counters.events[static_cast<size_t>(Event::kFlowMiss)]; }

// Poll iterations as the lcore loop runs them (poll.h): each port is asked
// for its burst size first, and only that many of its waiting packets are
// taken. Pod A sends its established flow (32 packets: it always has a full
// ring); pod B has `b_next()` waiting (when it sends): new flows while it
// floods. Each iteration moves the cycle counter by what it cost: A's hits
// and B's runs. `learn()` runs A alone long enough for the engine to have
// measured what a hit costs, as it has on a worker forwarding before a flood.
struct PollLoop {
  Fixture& f;
  std::function<Bytes()> b_next;
  bool a_sends = true;
  bool b_sends = true;
  const std::vector<Bytes> a_burst = std::vector<Bytes>(32, aToB(1000));
  uint64_t a_delivered = 0;   // A's packets out on B's port
  uint64_t a_asked_less = 0;  // polls in which A was offered less than a full burst
  // One iteration; returns what B's port was allowed to take.
  uint16_t iteration() {
    Engine& e = *f.engine;
    WorkerContext& w = e.worker(0);
    if (a_sends) {
      const uint16_t n = e.rxBurstSize(w, env().port[kRepA]);
      if (n < 32) ++a_asked_less;
      burstOnly(e, kRepA, std::vector<Bytes>(a_burst.begin(), a_burst.begin() + n));
      g_cycles.fetch_add(kHitBurstCycles * n / 32);
    }
    const uint16_t b = e.rxBurstSize(w, env().port[kRepB]);
    std::vector<Bytes> taken;
    for (uint16_t i = 0; b_sends && i < b; ++i) taken.push_back(b_next());
    const uint64_t runs = runsSoFar(e);
    if (!taken.empty()) burstOnly(e, kRepB, taken);
    g_cycles.fetch_add((runsSoFar(e) - runs) * kRunCycles);
    e.flush(w);
    e.quiescent(w);
    a_delivered += Fixture::drain(kRepB).size();
    (void)Fixture::drain(kRepA);
    return b;
  }
  void learn() {
    b_sends = false;
    for (unsigned i = 0; i < 2 * MissBudget::kLearnEvery; ++i) (void)iteration();
    b_sends = true;
    REQUIRE(f.engine->worker(0).miss.hitCost() == kHitBurstCycles / 32);
  }
};

// Pod B's flood: a new 5-tuple every packet.
std::function<Bytes()> flood() {
  return [n = uint32_t{0}]() mutable {
    ++n;
    return udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 64, static_cast<uint16_t>(1024 + n % 60000));
  };
}

}  // namespace

TEST_CASE("engine: while other traffic is forwarded, misses use at most their share of the cycles; alone, all of them",
          "[engine][miss]") {
  EngineConfig config;  // the defaults: 32 runs per iteration, 10 % of the cycles
  REQUIRE(config.miss_cycle_share == 10);
  Fixture f(config);
  f.inject(kRepA, aToB(1000));  // A's established flow
  (void)Fixture::drain(kRepB);
  PollLoop loop{f, flood()};
  loop.learn();

  // A forwards and B floods: once the engine has learnt what a run costs,
  // B's runs take 10 % of the cycles.
  constexpr unsigned kLearn = 50, kIterations = 2000;
  for (unsigned i = 0; i < kLearn; ++i) (void)loop.iteration();
  const uint64_t cycles0 = g_cycles.load(), runs0 = runsSoFar(*f.engine);
  unsigned b_skipped = 0;
  for (unsigned i = 0; i < kIterations; ++i) b_skipped += loop.iteration() == 0;
  const uint64_t runs = runsSoFar(*f.engine) - runs0;
  const double share = static_cast<double>(runs * kRunCycles) / static_cast<double>(g_cycles.load() - cycles0);
  INFO("B ran " << runs << " misses in " << kIterations << " iterations: " << share * 100 << " % of the cycles");
  CHECK(share <= 0.10 + 0.005);
  CHECK(share >= 0.09);  // and the share is used, not starved
  // A is never held back and all its packets go out.
  CHECK(loop.a_asked_less == 0);
  CHECK(loop.a_delivered == 32ull * (2 * MissBudget::kLearnEvery + kLearn + kIterations));
  // B is held back instead of received and dropped: only its first polls,
  // while its ratio of misses was being learnt, took more than the budget ran.
  CHECK(b_skipped > kIterations / 2);
  CHECK(f.stat("MissBudget") <= 4 * 32);
  CHECK(f.stat("MissBudget") == portInfo(*f.engine, "pf0vf1").miss_budget_dropped());

  // A stops: from the next iteration on, B's misses may use the whole core.
  loop.a_sends = false;
  (void)loop.iteration();  // the last one that saw A's hits
  const uint64_t drops = f.stat("MissBudget"), before = f.stat("FlowInstalled");
  for (unsigned i = 0; i < 50; ++i) CHECK(loop.iteration() == 32);
  CHECK(f.stat("FlowInstalled") - before == 32 * 50);
  CHECK(f.stat("MissBudget") == drops);
}

TEST_CASE("engine: a port flooding new flows gets smaller bursts and its full ones back when it stops",
          "[engine][miss]") {
  Fixture f;
  f.inject(kRepA, aToB(1000));
  f.inject(kRepB, bToA(7));  // B has an established flow too
  Fixture::drainAll();
  PollLoop loop{f, flood()};
  loop.learn();
  const auto b0 = portInfo(*f.engine, "pf0vf1");
  REQUIRE(b0.miss_throttled_polls() == 0);

  std::vector<uint16_t> bursts;
  for (unsigned i = 0; i < 80; ++i) bursts.push_back(loop.iteration());
  INFO("B's bursts while it floods: " << ::Catch::Detail::stringify(bursts));
  CHECK(bursts[0] == 32);  // nothing known of B yet
  // Within three polls its ratio of misses is past one half, and the bursts
  // shrink to what the budget runs, most iterations nothing.
  CHECK(bursts[3] < 32);
  CHECK(*std::max_element(bursts.begin() + 40, bursts.end()) <= 2);
  CHECK(std::count(bursts.begin(), bursts.end(), 0) >= 40);
  CHECK(loop.a_asked_less == 0);

  // B stops flooding and sends its established flow only: its hits bring
  // the ratio down, and it gets full bursts again.
  loop.b_next = [] { return bToA(7); };
  bursts.clear();
  for (unsigned i = 0; i < 30; ++i) bursts.push_back(loop.iteration());
  INFO("B's bursts after: " << ::Catch::Detail::stringify(bursts));
  const auto first_full = std::find(bursts.begin(), bursts.end(), 32);
  REQUIRE(first_full != bursts.end());
  CHECK(first_full - bursts.begin() <= 10);
  CHECK(std::all_of(first_full, bursts.end(), [](uint16_t n) { return n == 32; }));
  CHECK(loop.a_asked_less == 0);

  // Counted per port and in total; A never throttled.
  const auto b = portInfo(*f.engine, "pf0vf1");
  CHECK(b.miss_throttled_polls() > 20);
  CHECK(f.stat("MissThrottled") == b.miss_throttled_polls());
  CHECK(portInfo(*f.engine, "pf0vf0").miss_throttled_polls() == 0);
  CHECK(portInfo(*f.engine, "pf0vf0").miss_budget_dropped() == 0);
  CHECK(b.miss_budget_dropped() == f.stat("MissBudget"));
}

TEST_CASE("engine: the count alone holds a flooding port's bursts to the runs it may make", "[engine][miss]") {
  EngineConfig config;
  config.miss_budget = 8;
  config.miss_cycle_share = 100;  // no cycle bound
  Fixture f(config);
  f.inject(kRepA, aToB(1000));
  (void)Fixture::drain(kRepB);
  PollLoop loop{f, flood()};
  for (unsigned i = 0; i < 12; ++i) (void)loop.iteration();  // B's ratio of misses learnt
  // While it was learnt, B's bursts brought more misses than the budget
  // ran: dropped, and counted for B.
  CHECK(f.stat("MissBudget") > 0);
  CHECK(portInfo(*f.engine, "pf0vf1").miss_budget_dropped() == f.stat("MissBudget"));
  CHECK(portInfo(*f.engine, "pf0vf0").miss_budget_dropped() == 0);
  // While A forwards, B runs its 8 per iteration, and is asked for no more
  // than about that, so next to nothing is received only to be dropped.
  const uint64_t runs0 = f.stat("FlowInstalled"), drops0 = f.stat("MissBudget");
  for (unsigned i = 0; i < 100; ++i) {
    const uint16_t n = loop.iteration();
    CHECK(n >= 8);
    CHECK(n <= 9);
  }
  CHECK(f.stat("FlowInstalled") - runs0 == 8 * 100);
  CHECK(f.stat("MissBudget") - drops0 <= 100);
  CHECK(loop.a_asked_less == 0);
  CHECK(loop.a_delivered == 32 * 112);
}

// The budget's policy alone (miss_budget.h), with numbers for cycles.
TEST_CASE("miss budget: runs are measured only while other traffic waits", "[engine][miss]") {
  auto m = std::make_unique<MissBudget>();
  m->configure(32, 10);
  // (The counter stands still: nothing costs anything, only who waits matters.)
  CHECK(m->admit(1, 0) == MissBudget::Admission::kRun);  // no hit yet
  m->endIteration(1000, 0);
  CHECK(m->admit(1, 5) == MissBudget::Admission::kRunTimed);  // hits in this iteration
  m->endIteration(1000, 5);
  CHECK(m->admit(1, 5) == MissBudget::Admission::kRunTimed);  // hits in the last one
  m->endIteration(1000, 5);
  CHECK(m->admit(1, 5) == MissBudget::Admission::kRun);  // none in this one or the last
  auto unbound = std::make_unique<MissBudget>();
  unbound->configure(32, 100);
  unbound->endIteration(1000, 5);
  CHECK(unbound->admit(1, 9) == MissBudget::Admission::kRun);  // no cycle bound at all
}

TEST_CASE("miss budget: a run the lcore was preempted in leaves a bounded debt", "[engine][miss]") {
  auto m = std::make_unique<MissBudget>();
  m->configure(32, 10);
  uint64_t now = 0, hits = 0;
  auto iteration = [&](bool miss, uint64_t run_cycles) {
    hits += 32;
    now += 1920;  // the hits
    bool ran = false;
    if (const auto a = miss ? m->admit(1, hits) : MissBudget::Admission::kDrop; a != MissBudget::Admission::kDrop) {
      REQUIRE(a == MissBudget::Admission::kRunTimed);  // other traffic waits: the run is measured
      now += run_cycles;
      m->charge(run_cycles);
      ran = true;
    }
    m->endIteration(m->needsTime() ? now : MissBudget::kNoTime, hits);
    return ran;
  };
  for (unsigned i = 0; i < 2 * MissBudget::kLearnEvery; ++i) (void)iteration(false, 0);
  REQUIRE(m->hitCost() == 60);
  unsigned runs = 0;
  const uint64_t start = now;
  for (unsigned i = 0; i < 500; ++i) runs += iteration(true, 2000);
  const double share = 2000.0 * runs / static_cast<double>(now - start);
  INFO(runs << " runs, " << share * 100 << " % of the cycles");
  CHECK(share >= 0.09);
  CHECK(share <= 0.105);
  CHECK(m->runCost() == 2000);
  // One run takes 10 ms (the lcore preempted in it): the debt is four runs'
  // cost, not 10 ms, and runs resume within the iterations that repay it.
  while (!iteration(true, 26'000'000)) {
  }
  CHECK(m->credit() >= -MissBudget::kCarriedRuns * 2000 * 16);
  unsigned waited = 0;
  while (!iteration(true, 2000)) ++waited;
  CHECK(waited <= (MissBudget::kCarriedRuns + 1) * 2000 * 16 / 192);
  CHECK(m->runCost() <= 2000 * 16);  // one sample moves the average at most this far
}

TEST_CASE("miss budget: bursts follow a port's ratio of misses; mostly hits means full bursts", "[engine][miss]") {
  auto m = std::make_unique<MissBudget>();
  m->configure(32, 10);
  uint64_t now = 0, hits = 0, rx_a = 0, rx_b = 0;
  auto end = [&] {
    now += 2000;
    m->endIteration(now, hits);
  };
  for (unsigned i = 0; i < 2 * MissBudget::kLearnEvery; ++i) {
    hits += 32;
    end();
  }
  // Port 2: each poll a third of its packets miss, and the budget is spent
  // (a run far costlier than the share): still full bursts.
  for (unsigned i = 0; i < 20; ++i) {
    CHECK(m->burst(2, rx_b, hits) == 32);
    rx_b += 32;
    hits += 21;
    for (unsigned k = 0; k < 11; ++k) {
      if (m->admit(2, hits) == MissBudget::Admission::kRunTimed) m->charge(100'000);
    }
    end();
  }
  CHECK(m->credit() < 0);
  CHECK(m->missRatio(2) > 65536 / 4);
  CHECK(m->missRatio(2) <= 65536 / 2);
  // Port 1: every packet a miss: held back to what the budget runs.
  unsigned full = 0;
  for (unsigned i = 0; i < 20; ++i) {
    const uint16_t n = m->burst(1, rx_a, hits);
    full += n == 32;
    rx_a += n;
    hits += 32;  // port 2's hits
    for (unsigned k = 0; k < n; ++k) {
      if (m->admit(1, hits) == MissBudget::Admission::kRunTimed) m->charge(100'000);
    }
    end();
  }
  CHECK(full <= 3);  // until three polls have shown what it sends
  CHECK(m->missRatio(1) > 65536 / 2);
}

// A dataplane restart on an eswitch that kept the old process's rules: the
// new engine removes none of them before the first full sync is in and its
// flows have been offered; a flow offered unchanged takes its rule over, a
// changed one gets its new rule before the old one goes, and only then do
// the rules the new model did not offer again go (offload/inherited_rules.h).
TEST_CASE("engine: a restart keeps the old rules until the new model's flows replace them", "[engine][restart]") {
  using dpu::offload::testing::EswitchProcess;
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch sw(EswitchProfile::mlx5Like());
  const Bytes local = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6");      // pod a -> pod b
  const Bytes encap = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");      // pod a -> node2
  const Bytes decap = fromRemote(udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63));
  const Bytes back = udp4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5");       // pod b -> pod a
  std::map<std::string, dpu::flow::FlowSpec> old_rules;  // by what the flow is
  {
    EswitchProcess old_process(sw);
    EngineConfig c;
    c.offload = &old_process;
    Fixture f(c);
    f.inject(kRepA, local);
    f.inject(kRepA, encap);
    f.inject(kUplink, decap);
    f.inject(kRepB, back);
    Fixture::drainAll();
    f.engine->maintain();
    REQUIRE(sw.installedCount() == 4);
    old_process.kill();  // SIGKILL: the engine's clean-up below removes nothing
  }
  sw.restart(true);  // the eswitch kept them (unproven on mlx5: offload/README.md)
  for (const auto& rule : sw.inherited()) {
    const std::string m = dpu::flow::describeMatch(rule.flow.match);
    const char* what = m.find("nw_dst=10.244.2.7") != std::string::npos   ? "encap"
                       : m.find("nw_src=10.244.2.7") != std::string::npos ? "decap"
                       : m.find("nw_src=10.244.1.6") != std::string::npos ? "back"
                                                                          : "local";
    old_rules[what] = rule.flow;
  }
  REQUIRE(old_rules.size() == 4);

  // From here on, every change to the eswitch is checked: each flow the new
  // model keeps has a rule its packets hit at every step.
  std::vector<std::string> events;
  sw.setObserver([&](const std::string& op, dpu::offload::OffloadHandle, const dpu::flow::FlowSpec& flow) {
    std::string what = "new";
    for (const auto& [name, spec] : old_rules) {
      if (spec == flow) what = "old " + name;
    }
    events.push_back(op + " " + what);
    for (const char* kept : {"local", "encap", "decap"}) CHECK(sw.forwarder(old_rules[kept].match).has_value());
  });
  EswitchProcess new_process(sw);
  EngineConfig c;
  c.offload = &new_process;
  Fixture f(c, /*program=*/false);
  const uint64_t installs = sw.installCalls();
  // No model yet: nothing is removed, however often maintain() runs.
  for (int i = 0; i < 12; ++i) f.engine->maintain();
  CHECK(events.empty());
  CHECK(sw.installedCount() == 4);

  // The new model: node2 is now reached through another next hop, so the
  // encap flow has the same match and other actions; pod b sends nothing.
  REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse("192.168.100.2").value(), MacAddress{kRemotePodMac}).ok());
  auto r = fullSync(*f.engine, baseModel(), 1);
  REQUIRE(r.status() == dataplane::v1::OK);
  f.inject(kRepA, local);
  f.inject(kRepA, encap);
  f.inject(kUplink, decap);
  Fixture::drainAll();
  f.engine->maintain();  // offers the three flows, then ends the resync
  // Taken over: local and decap (never reinstalled). Replaced: encap, its new
  // rule first. Removed last: pod b's flow, which the new model did not offer.
  CHECK(events == std::vector<std::string>{"install new", "remove old encap", "remove old back"});
  CHECK(sw.installCalls() - installs == 1);
  CHECK(sw.installedCount() == 3);
  CHECK(sw.find(old_rules["local"]).has_value());
  CHECK(sw.find(old_rules["decap"]).has_value());
  CHECK_FALSE(sw.find(old_rules["back"]).has_value());
  unsigned in_hw = 0;
  for (const auto& fl : f.flows()) in_hw += fl.in_hw() ? 1 : 0;
  CHECK(in_hw == 3);
  sw.setObserver(nullptr);
}

TEST_CASE("engine: a restart without an agent removes the old rules after the resync timeout", "[engine][restart]") {
  using dpu::offload::testing::EswitchProcess;
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch sw(EswitchProfile::mlx5Like());
  {
    EswitchProcess old_process(sw);
    EngineConfig c;
    c.offload = &old_process;
    Fixture f(c);
    f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6"));
    Fixture::drainAll();
    f.engine->maintain();
    REQUIRE(sw.installedCount() == 1);
    old_process.kill();
  }
  sw.restart(true);
  EswitchProcess new_process(sw);
  EngineConfig c;
  c.offload = &new_process;
  c.offload_resync_timeout_ms = 5000;
  Fixture f(c, /*program=*/false);
  g_clock += 4999;
  f.engine->maintain();
  CHECK(sw.installedCount() == 1);  // still forwarding the old way while the agent may come
  g_clock += 1;
  f.engine->maintain();
  CHECK(sw.installedCount() == 0);
}

TEST_CASE("miss budget: the time an idle worker sleeps is no miss's cost", "[engine][miss]") {
  // A worker forwarding one established connection while another opens now
  // and then, the lcore loop sleeping whenever a poll brought nothing
  // (idle_sleep_us): a new connection's first packet, its handshake's
  // packets each a miss, is never dropped for the time slept in between.
  auto m = std::make_unique<MissBudget>();
  m->configure(32, 10);
  uint64_t now = 0, hits = 0;
  constexpr uint64_t kRun = 2000;
  auto poll = [&](unsigned hit_count, bool miss) {  // one iteration; whether its miss ran
    hits += hit_count;
    now += 60 * hit_count + 100;
    bool ran = false;
    if (miss) {
      const auto a = m->admit(1, hits);
      if (a != MissBudget::Admission::kDrop) {
        now += kRun;
        if (a == MissBudget::Admission::kRunTimed) m->charge(kRun);
        ran = true;
      }
    }
    m->endIteration(m->needsTime() ? now : MissBudget::kNoTime, hits);
    return ran;
  };
  auto sleep = [&](uint64_t cycles) {  // the loop's usleep, then Engine::awake
    now += cycles;
    if (m->timed()) m->awake(now);
  };
  for (unsigned i = 0; i < 2 * MissBudget::kLearnEvery; ++i) (void)poll(32, false);
  for (unsigned i = 0; i < 8; ++i) REQUIRE(poll(32, i % 4 == 0) == (i % 4 == 0));  // what a run costs, learnt
  REQUIRE(m->runCost() > 0);
  unsigned dropped = 0;
  for (unsigned c = 0; c < 200; ++c) {
    // SYN (a miss, with the other connection's hit), nothing, a sleep of ten
    // runs' time, the other connection's next packet, nothing, a sleep: the
    // SYN-ACK and the ACK (misses).
    dropped += !poll(1, true);
    (void)poll(0, false);
    sleep(10 * kRun);
    (void)poll(1, false);
    (void)poll(0, false);
    sleep(10 * kRun);
    dropped += !poll(1, true);
    dropped += !poll(1, true);
  }
  CHECK(dropped == 0);
  CHECK(m->credit() >= 0);
}
