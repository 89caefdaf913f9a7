// IPsec in the engine (docs/ipsec.md, "What the dataplane part must do"):
// real packets through the engine, the ESP they produce opened with an
// independent SA of overlay/esp.h built from the same key (and ESP built the
// same way injected on the uplink): encrypt on a cached flow, decrypt then
// decap, replay, ICV failure, unknown SPI, sequence limit, fail closed, SA
// state kept across updates, the outbound switch in one snapshot, reports.
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine_fixture.h"
#include "overlay/esp.h"
#include "temp_dir.h"

namespace engine_test {
namespace {

namespace dpv1 = dpu::dataplane::v1;

// Keys by direction: node1 -> node2 and node2 -> node1.
const std::string kKeyOut(16, '\x11');
const std::string kKeyIn(16, '\x22');
const std::string kKeyOut2(16, '\x33');
constexpr uint32_t kSpiOut = 0x11000101;
constexpr uint32_t kSpiIn = 0x11000202;
constexpr uint32_t kSpiOut2 = 0x22000303;

dpv1::IpsecSa* addSa(dpv1::LogicalModel& m, dpv1::IpsecDirection dir, uint32_t spi, const std::string& key,
                     uint64_t initial = 1, uint64_t limit = 1000000) {
  auto* sa = m.add_ipsec_sas();
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", spi);
  sa->set_name(std::string("node2/") + (dir == dpv1::INBOUND ? "in/" : "out/") + hex);
  sa->set_remote_node("node2");
  sa->set_peer_tunnel_ip("192.168.100.2");
  sa->set_direction(dir);
  sa->set_spi(spi);
  sa->set_local_epoch(1);
  sa->set_remote_epoch(1);
  sa->set_algorithm(dpv1::AES_128_GCM);
  sa->set_key(key);
  sa->set_salt(std::string("\x01\x02\x03\x04", 4));
  sa->set_esn(true);
  sa->set_initial_sequence(initial);
  sa->set_sequence_limit(dir == dpv1::OUTBOUND ? limit : 0);
  return sa;
}

dpv1::LogicalModel ipsecModel(bool on, bool outbound = true, bool inbound = true, uint64_t limit = 1000000) {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec(on);
  // The agent sizes the pod MTU for ESP (1408 on a 1500 underlay).
  if (outbound) addSa(m, dpv1::OUTBOUND, kSpiOut, kKeyOut, 1, limit);
  if (inbound) addSa(m, dpv1::INBOUND, kSpiIn, kKeyIn);
  return m;
}

overlay::EspSaConfig peerConfig(uint32_t spi, const std::string& key, uint64_t initial = 1) {
  overlay::EspSaConfig c;
  c.spi = spi;
  c.key.assign(key.begin(), key.end());
  c.salt = {1, 2, 3, 4};
  c.esn = true;
  c.initial_sequence = initial;
  return c;
}

// The frame's IP packet (after 14 bytes of Ethernet) through `transform`.
template <typename F>
Bytes onIp(const Bytes& frame, F transform, overlay::Status& st) {
  constexpr size_t kEth = 14;
  const size_t ip_len = frame.size() > kEth ? frame.size() - kEth : 0;
  std::vector<uint8_t> buf(256 + ip_len + 64);
  if (ip_len != 0) std::memcpy(buf.data() + 256, frame.data() + kEth, ip_len);
  overlay::PacketBuffer pb(buf.data(), static_cast<uint32_t>(buf.size()), 256, static_cast<uint32_t>(ip_len));
  st = transform(pb);
  Bytes out(kEth + pb.size());
  std::memcpy(out.data(), frame.data(), kEth);
  std::memcpy(out.data() + kEth, pb.data(), pb.size());
  return out;
}

// A frame from the peer (node2) ESP-protected under its SA.
Bytes espOf(overlay::EspOutboundSa& sa, const Bytes& frame) {
  overlay::Status st;
  Bytes out = onIp(frame, [&](overlay::PacketBuffer& pb) { return sa.encrypt(pb); }, st);
  REQUIRE(st == overlay::Status::kOk);
  return out;
}

// What the peer sends: Geneve from it, ESP-protected under its SA.
Bytes espFromRemote(overlay::EspOutboundSa& sa, const Bytes& inner, const char* peer = "192.168.100.2") {
  return espOf(sa, fromRemote(inner, 10, 9, 0x8000, peer));
}

// What the peer makes of what we sent: the plaintext Geneve frame.
Bytes peerOpens(overlay::EspInboundSa& sa, const Bytes& frame, overlay::Status& st) {
  return onIp(frame, [&](overlay::PacketBuffer& pb) { return sa.decrypt(pb); }, st);
}

// ESP in UDP 4500 (RFC 3948 §2.1) from a plain ESP frame and back: the UDP
// header after the 20-byte IPv4 header, protocol, lengths and checksum set.
Bytes natTWrap(const Bytes& esp, uint16_t sport = 4500) {
  REQUIRE(esp.size() >= 34);
  Bytes out(esp.size() + 8, 0);
  std::copy(esp.begin(), esp.begin() + 34, out.begin());
  std::copy(esp.begin() + 34, esp.end(), out.begin() + 42);
  uint8_t* udp = out.data() + 34;
  overlay::store16(udp, sport);
  overlay::store16(udp + 2, 4500);
  overlay::store16(udp + 4, static_cast<uint16_t>(out.size() - 34));
  out[14 + 9] = overlay::ipproto::kUdp;
  overlay::store16(out.data() + 14 + 2, static_cast<uint16_t>(out.size() - 14));
  overlay::store16(out.data() + 14 + 10, 0);
  overlay::store16(out.data() + 14 + 10, overlay::ipv4HeaderChecksum(out.data() + 14, 20));
  return out;
}
Bytes natTUnwrap(const Bytes& natt) {
  REQUIRE(natt.size() >= 42);
  Bytes out(natt.size() - 8, 0);
  std::copy(natt.begin(), natt.begin() + 34, out.begin());
  std::copy(natt.begin() + 42, natt.end(), out.begin() + 34);
  out[14 + 9] = overlay::ipproto::kEsp;
  overlay::store16(out.data() + 14 + 2, static_cast<uint16_t>(out.size() - 14));
  overlay::store16(out.data() + 14 + 10, 0);
  overlay::store16(out.data() + 14 + 10, overlay::ipv4HeaderChecksum(out.data() + 14, 20));
  return out;
}

// A NAT keepalive (RFC 3948 §2.2): one 0xff byte in UDP from `sport` to 4500,
// with `like`'s Ethernet and IP addresses; 43 bytes, unpadded, as a veth
// hands it to af_xdp (`padded`: to the Ethernet minimum, as a NIC does).
Bytes natKeepalive(const Bytes& like, uint16_t sport = 4500, bool padded = false) {
  REQUIRE(like.size() >= 42);
  Bytes k(padded ? 60 : 43, 0);
  std::copy(like.begin(), like.begin() + 34, k.begin());
  k[14 + 9] = overlay::ipproto::kUdp;
  overlay::store16(k.data() + 34, sport);
  overlay::store16(k.data() + 36, 4500);
  overlay::store16(k.data() + 38, 9);
  k[42] = 0xff;
  overlay::store16(k.data() + 14 + 2, 29);
  overlay::store16(k.data() + 14 + 10, 0);
  overlay::store16(k.data() + 14 + 10, overlay::ipv4HeaderChecksum(k.data() + 14, 20));
  return k;
}

uint32_t spiOf(const Bytes& frame) {
  uint32_t spi = 0;
  overlay::EspLayout layout;
  REQUIRE(overlay::espParse({frame.data() + 14, frame.size() - 14}, layout, spi) == overlay::Status::kOk);
  return spi;
}

// A copy: the reply is usually a temporary.
std::unique_ptr<const dpv1::IpsecSaState> stateOf(const dpv1::ProgramReply& r, uint32_t spi) {
  for (const auto& s : r.ipsec_sas()) {
    if (s.spi() == spi) return std::make_unique<const dpv1::IpsecSaState>(s);
  }
  return nullptr;
}

dpv1::ProgramReply status(Engine& e) {
  dpv1::ProgramRequest req;
  req.mutable_status();
  return e.program(req);
}

const Bytes kToRemote = udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7");
const Bytes kFromRemote = udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 63);

// The plaintext Geneve frame the engine sends for kToRemote (engine_test.cpp's reference).
Bytes expectedGeneve() {
  return geneve(udp4(kRouterMac, kRouterMac, "10.244.1.5", "10.244.2.7", 63), kUplinkMac, kNextHopMac, "192.168.100.1",
                "192.168.100.2", 20, 1, 0x8000, innerHash(kToRemote, env().port[kRepA]));
}

}  // namespace

TEST_CASE("engine ipsec: Hello says SAs are installed and every reply lists them with counters", "[engine][ipsec]") {
  Fixture f;
  dpv1::ProgramRequest hello;
  hello.mutable_hello();
  CHECK(f.engine->program(hello).hello().ipsec());
  const auto r = fullSync(*f.engine, ipsecModel(false), 2);
  REQUIRE(r.status() == dpv1::OK);
  REQUIRE(r.ipsec_sas_size() == 2);
  const auto in = stateOf(r, kSpiIn);
  REQUIRE(in != nullptr);
  CHECK(in->name() == "node2/in/11000202");
  CHECK(in->direction() == dpv1::INBOUND);
  CHECK(in->remote_node() == "node2");
  CHECK_FALSE(in->first_packet_received());
  CHECK(in->highest_sequence() == 0);
  // Listed on a status request and on Hello too; no key anywhere in a reply.
  CHECK(status(*f.engine).ipsec_sas_size() == 2);
  const auto h = f.engine->program(hello);
  CHECK(h.ipsec_sas_size() == 2);
  std::string bytes;
  REQUIRE(h.SerializeToString(&bytes));
  CHECK(bytes.find(kKeyOut) == std::string::npos);
  CHECK(bytes.find(kKeyIn) == std::string::npos);
  // The operator's view (dpuctl ipsec, metrics): epochs, limits, the backend; no key either.
  dpv1::OperatorRequest op;
  op.mutable_ipsec();
  const auto view = f.engine->operate(op);
  CHECK(view.error().empty());
  CHECK_FALSE(view.ipsec().encrypt());
  CHECK(view.ipsec().crypto_backend() == std::string(overlay::aeadBackendName(overlay::defaultAeadBackend())));
  REQUIRE(view.ipsec().sas_size() == 2);
  for (const auto& sa : view.ipsec().sas()) {
    CHECK(sa.peer_tunnel_ip() == "192.168.100.2");
    CHECK(sa.local_epoch() == 1);
    if (sa.state().direction() == dpv1::OUTBOUND) CHECK(sa.sequence_limit() == 1000000);
  }
  REQUIRE(view.SerializeToString(&bytes));
  CHECK(bytes.find(kKeyOut) == std::string::npos);
  CHECK(bytes.find(kKeyIn) == std::string::npos);
}

TEST_CASE("engine ipsec: dpuctl ipsec rotate is counted for the agent, which acknowledges what it took",
          "[engine][ipsec]") {
  Fixture f;
  dpv1::OperatorRequest rotate;
  rotate.mutable_ipsec_rotate();
  // No SA in force: nothing to rotate, nothing counted.
  auto refused = f.engine->operate(rotate);
  CHECK_THAT(refused.error(), Catch::Contains("holds no IPsec SA"));
  REQUIRE(fullSync(*f.engine, ipsecModel(false), 2).status() == dpv1::OK);
  CHECK(status(*f.engine).ipsec_rotation_requests() == 0);
  auto taken = f.engine->operate(rotate);
  REQUIRE(taken.error().empty());
  CHECK(taken.ipsec().rotation_requests() == 1);
  CHECK(taken.ipsec().rotations_taken() == 0);
  CHECK(f.engine->operate(rotate).ipsec().rotation_requests() == 2);
  // Every reply carries the count, the Hello's too (a restarted agent reads it there).
  dpv1::ProgramRequest hello;
  hello.mutable_hello();
  const auto h = f.engine->program(hello);
  CHECK(h.ipsec_rotation_requests() == 2);
  CHECK(h.ipsec_rotations_taken() == 0);
  // The agent's acknowledgement is kept, never above the requests, never back.
  dpv1::ProgramRequest ack;
  ack.mutable_status()->set_ipsec_rotations_taken(2);
  CHECK(f.engine->program(ack).ipsec_rotations_taken() == 2);
  ack.mutable_status()->set_ipsec_rotations_taken(9);
  CHECK(f.engine->program(ack).ipsec_rotations_taken() == 2);
  ack.mutable_status()->set_ipsec_rotations_taken(1);
  CHECK(f.engine->program(ack).ipsec_rotations_taken() == 2);
  dpv1::OperatorRequest view;
  view.mutable_ipsec();
  const auto v = f.engine->operate(view);
  CHECK(v.ipsec().rotation_requests() == 2);
  CHECK(v.ipsec().rotations_taken() == 2);
  CHECK_FALSE(v.ipsec().has_rotation());  // no agent has reported one
  // The agent's rotation state is kept for dpuctl ipsec, with its age.
  auto* state = ack.mutable_status()->mutable_ipsec_rotation();
  state->set_phase("grace");
  state->set_current_epoch(4);
  state->set_previous_epoch(3);
  state->set_previous_accepted_for_ms(2'000);
  state->add_peers()->set_node("node-b");
  REQUIRE(f.engine->program(ack).status() == dpv1::OK);
  auto kept = f.engine->operate(view).ipsec();
  CHECK(kept.rotation().phase() == "grace");
  CHECK(kept.rotation().previous_epoch() == 3);
  CHECK(kept.rotation().peers(0).node() == "node-b");
  CHECK(kept.rotation_reported_ms_ago() < 5'000);
  // A state no agent sends is refused, saying what is wrong; what was kept stays.
  dpv1::ProgramRequest bad;
  bad.mutable_status()->set_ipsec_rotations_taken(2);
  bad.mutable_status()->mutable_ipsec_rotation()->set_phase("switching");
  auto refused_status = f.engine->program(bad);
  CHECK(refused_status.status() == dpv1::INVALID);
  CHECK_THAT(refused_status.message(), Catch::Contains("\"switching\" is not a rotation phase"));
  CHECK(f.engine->operate(view).ipsec().rotation().phase() == "grace");
  // An agent with IPsec off reports none: the old state goes.
  dpv1::ProgramRequest off;
  off.mutable_status()->set_ipsec_rotations_taken(2);
  REQUIRE(f.engine->program(off).status() == dpv1::OK);
  CHECK_FALSE(f.engine->operate(view).ipsec().has_rotation());
}

TEST_CASE("engine ipsec: with encryption on, a cached flow leaves as ESP the peer opens to the Geneve packet",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 2).status() == dpv1::OK);
  auto peer = overlay::EspInboundSa::create(peerConfig(kSpiOut, kKeyOut));
  REQUIRE(peer.ok());
  const Bytes expected = expectedGeneve();
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    f.inject(kRepA, kToRemote);
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    const Bytes& esp = out[0];
    // Outer IPv4 protocol 50, lengths and checksum right.
    CHECK(esp[14 + 9] == overlay::ipproto::kEsp);
    CHECK(overlay::load16(esp.data() + 14 + 2) == esp.size() - 14);
    CHECK(overlay::checksumFinish(overlay::checksumAdd(esp.data() + 14, 20)) == 0);
    CHECK(spiOf(esp) == kSpiOut);
    CHECK(overlay::load32(esp.data() + 14 + 20 + 4) == seq);
    overlay::Status st;
    const Bytes opened = peerOpens(*peer, esp, st);
    REQUIRE(st == overlay::Status::kOk);
    CHECK(dpu::test::toHex(opened.data(), opened.size()) == dpu::test::toHex(expected.data(), expected.size()));
  }
  // One slow path: the later packets were encrypted on the hit path.
  CHECK(f.stat("FlowMiss") == 1);
  CHECK(f.stat("FlowHit") == 2);
  const auto out = stateOf(status(*f.engine), kSpiOut);
  REQUIRE(out != nullptr);
  CHECK(out->packets() == 3);
  CHECK(out->highest_sequence() == 3);
  // The flow names the encryption; offload would leave it in software.
  bool esp_flow = false;
  for (const auto& fl : f.flows()) esp_flow = esp_flow || fl.actions().find("esp_encrypt") != std::string::npos;
  CHECK(esp_flow);
}

TEST_CASE("engine ipsec: arriving ESP is authenticated, anti-replayed and decrypted before the Geneve decap",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 2).status() == dpv1::OK);
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  const Bytes first = espFromRemote(*sender, kFromRemote);
  f.inject(kUplink, first);
  auto out = Fixture::drain(kRepA);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == udp4(kMacA, kRouterMac, "10.244.2.7", "10.244.1.5", 63));
  const auto in = stateOf(status(*f.engine), kSpiIn);
  REQUIRE(in != nullptr);
  CHECK(in->first_packet_received());
  CHECK(in->packets() == 1);
  CHECK(in->highest_sequence() == 1);

  SECTION("a replay is dropped and counted") {
    f.inject(kUplink, first);
    CHECK(Fixture::drain(kRepA).empty());
    CHECK(f.stat("EspReplay") == 1);
    CHECK(stateOf(status(*f.engine), kSpiIn)->replay_drops() == 1);
  }
  SECTION("a packet that does not authenticate is dropped and counted") {
    Bytes bad = espFromRemote(*sender, kFromRemote);
    bad[bad.size() - 20] ^= 0x01;
    f.inject(kUplink, bad);
    CHECK(Fixture::drain(kRepA).empty());
    CHECK(f.stat("EspAuthFailed") == 1);
    CHECK(stateOf(status(*f.engine), kSpiIn)->icv_failures() == 1);
    // The window did not move: the packet after it is accepted.
    f.inject(kUplink, espFromRemote(*sender, kFromRemote));
    CHECK(Fixture::drain(kRepA).size() == 1);
  }
  SECTION("an SPI of no inbound SA from a known node, and ESP from an unknown address") {
    auto other = overlay::EspOutboundSa::create(peerConfig(0x33000404, kKeyIn));
    REQUIRE(other.ok());
    f.inject(kUplink, espFromRemote(*other, kFromRemote));
    CHECK(f.stat("IpsecUnknownSpi") == 1);
    f.inject(kUplink, espFromRemote(*sender, kFromRemote, "192.168.100.99"));
    CHECK(f.stat("IpsecUnknownPeer") == 1);
    CHECK(Fixture::drain(kRepA).empty());
  }
}

// The outer IPv4 header checksum is not covered by the ICV: ESP whose header
// sums wrong still authenticates, and decrypt patches the checksum only
// incrementally, so the Geneve decap after it finds the header as wrong as it
// came and drops it, whatever the NIC said (a NIC that verified a header
// right has its verdict kept).
TEST_CASE("engine ipsec: decrypted ESP whose outer IPv4 checksum was wrong is dropped by the decap",
          "[engine][ipsec]") {
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  const uint64_t unknown = RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN;
  const uint64_t bad = RTE_MBUF_F_RX_IP_CKSUM_BAD;
  const uint64_t good = RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  for (const unsigned workers : {1u, 2u}) {
    for (const bool lanes : {true, false}) {
      for (const uint64_t nic : {unknown, bad}) {
        INFO("workers " << workers << ", lanes " << lanes << ", NIC verdict " << nic);
        EngineConfig c;
        c.workers = workers;
        c.lanes = lanes;
        Fixture f(c);
        REQUIRE(fullSync(*f.engine, ipsecModel(true), 2).status() == dpv1::OK);
        Bytes esp = espFromRemote(*sender, kFromRemote);
        esp[14 + 11] ^= 0x40;
        f.inject(kUplink, {esp}, 0, nic);
        CHECK(Fixture::drain(kRepA).empty());
        CHECK(f.stat("BadIpv4Checksum") == 1);
        // It authenticated: the SA counted it and its number is used.
        CHECK(stateOf(status(*f.engine), kSpiIn)->packets() == 1);
        // A right one is delivered, with the NIC's verdict or without.
        f.inject(kUplink, {espFromRemote(*sender, kFromRemote)}, 0, nic == bad ? good : unknown);
        CHECK(Fixture::drain(kRepA).size() == 1);
        CHECK(f.stat("BadIpv4Checksum") == 1);
      }
    }
  }
}

// With IPsec on, the ESP lane (EspEncap4) and the uplink's lane taking what
// ESP carried send what the general routine sends, byte for byte and
// counter for counter (runLaneScenarios: each list three times, so the
// arriving ESP of the second and third rounds is a replay, dropped alike);
// plaintext from the peer is refused on both.
TEST_CASE("engine ipsec: the lanes send what the general routine sends, ESP both ways", "[engine][ipsec][lanes]") {
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  std::vector<Bytes> arriving;
  for (unsigned i = 0; i < 4; ++i) arriving.push_back(espFromRemote(*sender, kFromRemote));
  // Another flow from the peer, carried in ESP too.
  arriving.push_back(espFromRemote(*sender, udp4(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.6", 63, 300)));
  // What ESP carries that the uplink's lane does not take where it lies
  // (espReceive strips it for the general path): an IPv6 inner packet; a
  // Geneve UDP checksum, wrong, that no NIC verified; Geneve without the OVN
  // option; and, in UDP 4500, a packet it does take.
  arriving.push_back(
      espFromRemote(*sender, tcp6(kRouterMac, kRemotePodMac, "fd00:10:244:2::7", "fd00:10:244:1::5", 63)));
  Bytes summed = fromRemote(kFromRemote);
  overlay::store16(summed.data() + 14 + 20 + 6, 0x1234);
  arriving.push_back(espOf(*sender, summed));
  Bytes bare = fromRemote(kFromRemote);
  bare[14 + 20 + 8] = 0;  // Geneve's option length: none
  arriving.push_back(espOf(*sender, bare));
  arriving.push_back(natTWrap(espFromRemote(*sender, kFromRemote)));
  const std::vector<std::pair<unsigned, std::vector<Bytes>>> scenarios = {
      {kRepA, {kToRemote, kToRemote, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.8", 64, 700)}},
      // TTL 1 on the hit; too big for the ESP MTU with DF.
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 1, 1302)}},
      {kRepA, {udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1300, 1380, true)}},
      {kUplink, arriving},
      {kUplink, {fromRemote(kFromRemote)}},
  };
  const dpv1::LogicalModel m = ipsecModel(true);
  const LaneRun on = runLaneScenarios(true, scenarios, m);
  const LaneRun off = runLaneScenarios(false, scenarios, m);
  REQUIRE(on.sent.size() == scenarios.size());
  checkLanesAgree(on, off);
  CHECK(on.counters.at("EspReplay") == 18);
  CHECK(on.counters.at("IpsecPlaintext") == 3);
  // The decrypted flows were hit, not only set up.
  CHECK(on.counters.at("FlowHit") > 0);
  for (const Lane& lane : kLanes) {
    if ((lane.ops & op::kEsp) == 0) continue;
    INFO("lane kind " << int(lane.kind));
    CHECK(on.kinds.count(lane.kind) == 1);
  }
  CHECK(on.kinds.count(kActionsDecap) == 1);

  // The ESP lane builds the headers around the ESP itself (encapEsp4): with
  // NAT traversal (ESP inside UDP 4500) and with the outbound SA's
  // sequence_limit reached midway it still sends and counts what the
  // general routine does.
  dpv1::LogicalModel natt = ipsecModel(true);
  natt.mutable_node()->set_ipsec_nat_traversal(true);
  const LaneRun natt_on = runLaneScenarios(true, scenarios, natt);
  checkLanesAgree(natt_on, runLaneScenarios(false, scenarios, natt));
  REQUIRE(!natt_on.sent[0].empty());
  const Bytes& first = natt_on.sent[0][0];  // the port's tag, then the frame
  REQUIRE(first.size() > 1 + 14 + 20 + 8);
  CHECK(first[0] == kUplink);
  CHECK(first[1 + 14 + 9] == overlay::ipproto::kUdp);
  CHECK(overlay::load16(first.data() + 1 + 14 + 20 + 2) == 4500);
  CHECK(natt_on.counters.at("FlowHit") > 0);
  const dpv1::LogicalModel limited = ipsecModel(true, true, true, 4);
  const LaneRun limited_on = runLaneScenarios(true, scenarios, limited);
  checkLanesAgree(limited_on, runLaneScenarios(false, scenarios, limited));
  CHECK(limited_on.counters.at("IpsecSequenceLimit") > 0);
}

TEST_CASE("engine ipsec: an outbound SA never sends above its sequence_limit; a raised limit resumes it",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true, true, true, 2), 2).status() == dpv1::OK);
  for (int i = 0; i < 3; ++i) f.inject(kRepA, kToRemote);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 2);
  CHECK(f.stat("IpsecSequenceLimit") == 1);
  auto st = stateOf(status(*f.engine), kSpiOut);
  REQUIRE(st != nullptr);
  CHECK(st->limit_drops() == 1);
  CHECK(st->highest_sequence() == 2);
  // The agent raises the limit (the same SA sent again): the counter goes on at 3.
  REQUIRE(fullSync(*f.engine, ipsecModel(true, true, true, 100), 3).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(overlay::load32(out[0].data() + 14 + 20 + 4) == 3);
  st = stateOf(status(*f.engine), kSpiOut);
  CHECK(st->packets() == 3);
  CHECK(st->limit_drops() == 1);
}

TEST_CASE("engine ipsec: with encryption on, no outbound SA and plaintext from an IPsec peer are dropped",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true, false, true), 2).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  f.inject(kRepA, kToRemote);
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(f.stat("IpsecNoSa") == 2);
  f.inject(kUplink, fromRemote(kFromRemote));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("IpsecPlaintext") == 1);
  // The outbound SA arrives: the cached drop gives way to ESP.
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 3).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(spiOf(out[0]) == kSpiOut);
}

TEST_CASE("engine ipsec: during a rollout plaintext is accepted per peer, from the peers whose SAs say so",
          "[engine][ipsec]") {
  Fixture f;
  // node2 advertises `on` (its plaintext refused); node3 still runs `keys`
  // (plaintext_accepted on its inbound SA).
  auto model = [](bool node3_plaintext) {
    dpv1::LogicalModel m = ipsecModel(true);
    addRemoteNode(m, "node3", "192.168.100.3", "10.244.3.0/24", 30);
    auto* sa = addSa(m, dpv1::INBOUND, 0x11000404, kKeyIn);
    sa->set_name("node3/in/11000404");
    sa->set_remote_node("node3");
    sa->set_peer_tunnel_ip("192.168.100.3");
    sa->set_plaintext_accepted(node3_plaintext);
    return m;
  };
  REQUIRE(fullSync(*f.engine, model(true), 2).status() == dpv1::OK);
  const Bytes from3 = udp4(kRouterMac, kRemotePodMac, "10.244.3.7", "10.244.1.5", 63);
  f.inject(kUplink, fromRemote(from3, 10, 9, 0x8000, "192.168.100.3"));
  CHECK(Fixture::drain(kRepA).size() == 1);
  f.inject(kUplink, fromRemote(kFromRemote));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("IpsecPlaintext") == 1);
  // node3's ESP is accepted too (it may switch at any time).
  auto sender3 = overlay::EspOutboundSa::create(peerConfig(0x11000404, kKeyIn));
  REQUIRE(sender3.ok());
  f.inject(kUplink, espFromRemote(*sender3, from3, "192.168.100.3"));
  CHECK(Fixture::drain(kRepA).size() == 1);
  // node3 advertises `on`: the same SA, its plaintext now refused, its
  // replay window kept (the SA was not built anew).
  REQUIRE(fullSync(*f.engine, model(false), 3).status() == dpv1::OK);
  f.inject(kUplink, fromRemote(from3, 10, 9, 0x8000, "192.168.100.3"));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("IpsecPlaintext") == 2);
  f.inject(kUplink, espFromRemote(*sender3, from3, "192.168.100.3"));
  CHECK(Fixture::drain(kRepA).size() == 1);
  const auto st3 = stateOf(status(*f.engine), 0x11000404);
  REQUIRE(st3 != nullptr);
  CHECK(st3->packets() == 2);
  CHECK(f.stat("EspReplay") == 0);
}

TEST_CASE("engine ipsec: plaintext_accepted is refused on an outbound SA, naming the field", "[engine][ipsec]") {
  Fixture f;
  dpv1::LogicalModel m = ipsecModel(true);
  m.mutable_ipsec_sas(0)->set_plaintext_accepted(true);
  const auto reply = fullSync(*f.engine, m, 2);
  bool named = false;
  for (const auto& p : reply.problems()) {
    named = named || (p.kind() == dpv1::ObjectProblem::IPSEC_SA && p.reason().find("plaintext_accepted") != std::string::npos);
  }
  CHECK(named);
}

TEST_CASE("engine ipsec: in keys mode SAs are installed and ESP accepted while the node sends plaintext",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(false), 2).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == expectedGeneve());
  // Plaintext and ESP from the peer are both delivered.
  f.inject(kUplink, fromRemote(kFromRemote));
  CHECK(Fixture::drain(kRepA).size() == 1);
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  f.inject(kUplink, espFromRemote(*sender, kFromRemote));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(stateOf(status(*f.engine), kSpiIn)->first_packet_received());
  CHECK(f.stat("IpsecPlaintext") == 0);
}

TEST_CASE("engine ipsec: an SA sent again keeps its counter and replay window; a higher initial_sequence moves it up",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 2).status() == dpv1::OK);
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  const Bytes first = espFromRemote(*sender, kFromRemote);
  f.inject(kUplink, first);
  REQUIRE(Fixture::drain(kRepA).size() == 1);
  f.inject(kRepA, kToRemote);
  f.inject(kRepA, kToRemote);
  REQUIRE(Fixture::drain(kUplink).size() == 2);

  // The same model again (an agent restart's resync).
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 3).status() == dpv1::OK);
  f.inject(kUplink, first);  // still a replay
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("EspReplay") == 1);
  f.inject(kRepA, kToRemote);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(overlay::load32(out[0].data() + 14 + 20 + 4) == 3);
  const auto st = stateOf(status(*f.engine), kSpiOut);
  CHECK(st->packets() == 3);

  // The agent's mark moved above (a new reservation): the next number is there.
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec(true);
  addSa(m, dpv1::OUTBOUND, kSpiOut, kKeyOut, 1000, 2000);
  addSa(m, dpv1::INBOUND, kSpiIn, kKeyIn);
  REQUIRE(fullSync(*f.engine, m, 4).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(overlay::load32(out[0].data() + 14 + 20 + 4) == 1000);

  // A new key under the same name is a new SA: it starts at its initial_sequence.
  dpv1::LogicalModel rekeyed = baseModel();
  rekeyed.mutable_node()->set_ipsec(true);
  addSa(rekeyed, dpv1::OUTBOUND, kSpiOut, kKeyOut2, 5, 2000);
  addSa(rekeyed, dpv1::INBOUND, kSpiIn, kKeyIn);
  REQUIRE(fullSync(*f.engine, rekeyed, 5).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(overlay::load32(out[0].data() + 14 + 20 + 4) == 5);
  CHECK(stateOf(status(*f.engine), kSpiOut)->packets() == 1);
}

TEST_CASE("engine ipsec: an outbound switch in one Delta moves the cached flow to the new SA, never plaintext",
          "[engine][ipsec]") {
  Fixture f;
  REQUIRE(fullSync(*f.engine, ipsecModel(true), 2).status() == dpv1::OK);
  f.inject(kRepA, kToRemote);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(spiOf(out[0]) == kSpiOut);

  dpv1::ProgramRequest req;
  auto* d = req.mutable_delta();
  d->set_base_generation(2);
  d->set_generation(3);
  d->add_delete_ipsec_sas("node2/out/11000101");
  dpv1::LogicalModel scratch;
  *d->add_upsert_ipsec_sas() = *addSa(scratch, dpv1::OUTBOUND, kSpiOut2, kKeyOut2);
  const auto r = f.engine->program(req);
  INFO(r.message());
  REQUIRE(r.status() == dpv1::OK);
  CHECK(stateOf(r, kSpiOut) == nullptr);
  REQUIRE(stateOf(r, kSpiOut2) != nullptr);

  f.inject(kRepA, kToRemote);
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(spiOf(out[0]) == kSpiOut2);
  auto peer = overlay::EspInboundSa::create(peerConfig(kSpiOut2, kKeyOut2));
  REQUIRE(peer.ok());
  overlay::Status st;
  const Bytes opened = peerOpens(*peer, out[0], st);
  REQUIRE(st == overlay::Status::kOk);
  CHECK(opened == expectedGeneve());
  // The flow was kept (the node still has an outbound SA), only re-resolved.
  CHECK(f.stat("FlowMiss") == 1);
}

TEST_CASE("engine ipsec: with NAT traversal, ESP leaves inside UDP 4500 and the peer opens it to the Geneve packet",
          "[engine][ipsec][natt]") {
  Fixture f;
  auto m = ipsecModel(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
  auto peer = overlay::EspInboundSa::create(peerConfig(kSpiOut, kKeyOut));
  REQUIRE(peer.ok());
  const Bytes expected = expectedGeneve();
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    f.inject(kRepA, kToRemote);
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    const Bytes& natt = out[0];
    REQUIRE(natt.size() > 14 + 20 + 8 + 8);
    const uint8_t* ip = natt.data() + 14;
    const uint8_t* udp = ip + 20;
    // Outer IPv4 | UDP 4500 -> 4500, checksum 0 | ESP (RFC 3948 §2.1).
    CHECK(overlay::load16(natt.data() + 12) == overlay::eth::kTypeIpv4);
    CHECK(ip[9] == overlay::ipproto::kUdp);
    CHECK(overlay::load16(ip + 2) == natt.size() - 14);
    CHECK(overlay::checksumFinish(overlay::checksumAdd(ip, 20)) == 0);
    CHECK(overlay::load16(udp) == 4500);
    CHECK(overlay::load16(udp + 2) == 4500);
    CHECK(overlay::load16(udp + 4) == natt.size() - 14 - 20);
    CHECK(overlay::load16(udp + 6) == 0);
    CHECK(overlay::load32(udp + 8) == kSpiOut);  // the SPI, never the zero non-ESP marker
    CHECK(overlay::load32(udp + 12) == seq);
    overlay::Status st;
    const Bytes opened = peerOpens(*peer, natTUnwrap(natt), st);
    REQUIRE(st == overlay::Status::kOk);
    CHECK(dpu::test::toHex(opened.data(), opened.size()) == dpu::test::toHex(expected.data(), expected.size()));
  }
}

TEST_CASE("engine ipsec: ESP in UDP 4500 is decrypted and decapped; a zero non-ESP marker is dropped and counted",
          "[engine][ipsec][natt]") {
  // Accepted whether or not this node sends NAT-T itself (docs/ipsec.md).
  const bool nat_t = GENERATE(false, true);
  CAPTURE(nat_t);
  Fixture f;
  auto m = ipsecModel(true);
  m.mutable_node()->set_ipsec_nat_traversal(nat_t);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  const Bytes expected = udp4(kMacA, kRouterMac, "10.244.2.7", "10.244.1.5", 63);

  SECTION("from port 4500, and from the port a NAT mapped it to") {
    f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote)));
    f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote), 61234));
    auto out = Fixture::drain(kRepA);
    REQUIRE(out.size() == 2);
    CHECK(out[0] == expected);
    CHECK(out[1] == expected);
    const auto in = stateOf(status(*f.engine), kSpiIn);
    REQUIRE(in != nullptr);
    CHECK(in->packets() == 2);
    CHECK(in->highest_sequence() == 2);
  }
  SECTION("a replay inside UDP is still a replay, a bad ICV still fails") {
    const Bytes first = natTWrap(espFromRemote(*sender, kFromRemote));
    f.inject(kUplink, first);
    f.inject(kUplink, first);
    Bytes bad = natTWrap(espFromRemote(*sender, kFromRemote));
    bad[bad.size() - 20] ^= 0x01;
    f.inject(kUplink, bad);
    CHECK(Fixture::drain(kRepA).size() == 1);
    CHECK(f.stat("EspReplay") == 1);
    CHECK(f.stat("EspAuthFailed") == 1);
  }
  SECTION("four zero bytes (IKE's non-ESP marker) and a NAT keepalive are not ESP, each counted") {
    Bytes ike = natTWrap(espFromRemote(*sender, kFromRemote));
    overlay::store32(ike.data() + 14 + 20 + 8, 0);
    f.inject(kUplink, ike);
    // A NAT keepalive: one 0xff byte (RFC 3948 §2.3), padded to the Ethernet minimum.
    Bytes keepalive(60, 0);
    std::copy(ike.begin(), ike.begin() + 42, keepalive.begin());
    keepalive[42] = 0xff;
    overlay::store16(keepalive.data() + 14 + 20 + 4, 9);
    overlay::store16(keepalive.data() + 14 + 2, 29);
    overlay::store16(keepalive.data() + 14 + 10, 0);
    overlay::store16(keepalive.data() + 14 + 10, overlay::ipv4HeaderChecksum(keepalive.data() + 14, 20));
    f.inject(kUplink, keepalive);
    CHECK(Fixture::drain(kRepA).empty());
    CHECK(f.stat("IpsecNatTNonEsp") == 1);
    CHECK(f.stat("IpsecNatKeepalive") == 1);  // counted apart: it is what a NATed peer is expected to send
    CHECK(stateOf(status(*f.engine), kSpiIn)->packets() == 0);
    // The SA's window did not move: the next real packet is accepted.
    f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote)));
    CHECK(Fixture::drain(kRepA).size() == 1);
  }
}


TEST_CASE("engine ipsec: a node behind a NAT is sent to at its NAT address, on the port its authenticated packets came from",
          "[engine][ipsec][natt]") {
  Fixture f;
  const char* kNat = "198.51.100.7";
  const auto kNatMac = mac("02:00:00:00:00:77");
  REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse(kNat).value(), MacAddress{kNatMac}).ok());
  auto m = ipsecModel(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  m.mutable_remote_nodes(0)->set_nat_address(kNat);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
  // Its next hop is resolved for the NAT address, not its (private) tunnel IP.
  const auto wanted = f.engine->wantedTunnelPeers();
  REQUIRE(wanted.size() == 1);
  CHECK(wanted[0].str() == kNat);
  auto peer = overlay::EspInboundSa::create(peerConfig(kSpiOut, kKeyOut));
  REQUIRE(peer.ok());
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  const Bytes expected = geneve(udp4(kRouterMac, kRouterMac, "10.244.1.5", "10.244.2.7", 63), kUplinkMac, kNatMac,
                                "192.168.100.1", kNat, 20, 1, 0x8000, innerHash(kToRemote, env().port[kRepA]));
  auto sent = [&](uint16_t dport) {
    f.inject(kRepA, kToRemote);
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    const uint8_t* ip = out[0].data() + 14;
    CHECK(Bytes(out[0].begin(), out[0].begin() + 6) == Bytes(kNatMac.begin(), kNatMac.end()));
    CHECK(IpAddress::v4(overlay::load32(ip + 16)).str() == kNat);
    CHECK(overlay::load16(ip + 20) == 4500);
    CHECK(overlay::load16(ip + 22) == dport);
    overlay::Status st;
    const Bytes opened = peerOpens(*peer, natTUnwrap(out[0]), st);
    REQUIRE(st == overlay::Status::kOk);
    CHECK(dpu::test::toHex(opened.data(), opened.size()) == dpu::test::toHex(expected.data(), expected.size()));
  };
  auto natPeer = [&] {
    dpv1::OperatorRequest op;
    op.mutable_ipsec();
    const auto view = f.engine->operate(op);
    std::string out;
    for (const auto& sa : view.ipsec().sas()) {
      CHECK((out.empty() || out == sa.nat_peer()));
      out = sa.nat_peer();
    }
    return out;
  };
  // Nothing arrived yet: its NAT address, port 4500.
  sent(4500);
  CHECK(natPeer() == std::string(kNat) + ":4500");

  // What it sends arrives from the NAT address, from the port the NAT chose.
  f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote, kNat), 61234));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(natPeer() == std::string(kNat) + ":61234");
  sent(61234);

  // Neither a packet that does not authenticate nor a keepalive moves it.
  Bytes forged = natTWrap(espFromRemote(*sender, kFromRemote, kNat), 40000);
  forged[forged.size() - 20] ^= 0x01;
  f.inject(kUplink, forged);
  f.inject(kUplink, natKeepalive(forged, 50000));
  f.inject(kUplink, natKeepalive(forged, 50001, true));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("EspAuthFailed") == 1);
  CHECK(f.stat("IpsecNatKeepalive") == 2);
  sent(61234);
  // Its tunnel IP is not where it is: ESP from there is from no known node.
  f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote), 61234));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("IpsecUnknownPeer") == 1);

  // The NAT mapped it again: the next authenticated packet says so.
  f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote, kNat), 61300));
  CHECK(Fixture::drain(kRepA).size() == 1);
  sent(61300);
  // A new model (an agent resync) keeps what was learned; a new NAT address starts again at 4500.
  REQUIRE(fullSync(*f.engine, m, 3).status() == dpv1::OK);
  sent(61300);
  const char* kNat2 = "198.51.100.8";
  REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse(kNat2).value(), MacAddress{kNatMac}).ok());
  m.mutable_remote_nodes(0)->set_nat_address(kNat2);
  REQUIRE(fullSync(*f.engine, m, 4).status() == dpv1::OK);
  CHECK(natPeer() == std::string(kNat2) + ":4500");
}

// The port a NAT chose, learned from authenticated packets, is kept in the
// engine's file: a restarted dataplane sends there at once, not to 4500
// until the peer's next packet (which a NAT that forwards nothing in
// unasked would not let through).
TEST_CASE("engine ipsec: the port learned for a NATed peer outlives a restart, for the same NAT address",
          "[engine][ipsec][natt]") {
  const dpu::test::TempDir dir("dpu-engine-natt");
  REQUIRE(!dir.path.empty());
  EngineConfig c;
  c.nat_ports_file = dir.file("natt-ports");
  const char* kNat = "198.51.100.7";
  const auto kNatMac = mac("02:00:00:00:00:77");
  auto m = ipsecModel(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  m.mutable_remote_nodes(0)->set_nat_address(kNat);
  auto sender = overlay::EspOutboundSa::create(peerConfig(kSpiIn, kKeyIn));
  REQUIRE(sender.ok());
  auto start = [&](Fixture& f) {
    REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse(kNat).value(), MacAddress{kNatMac}).ok());
    REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
  };
  auto sentTo = [&](Fixture& f) {
    f.inject(kRepA, kToRemote);
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    return overlay::load16(out[0].data() + 14 + 22);
  };
  {
    Fixture f(c);
    start(f);
    CHECK(sentTo(f) == 4500);
    f.engine->maintain();
    CHECK_FALSE(std::filesystem::exists(c.nat_ports_file));  // nothing learned, nothing written
    f.inject(kUplink, natTWrap(espFromRemote(*sender, kFromRemote, kNat), 61234));
    CHECK(Fixture::drain(kRepA).size() == 1);
    CHECK(sentTo(f) == 61234);
    f.engine->maintain();
  }
  {
    Fixture f(c);
    start(f);
    CHECK(sentTo(f) == 61234);  // before anything arrived from it
  }
  // The file names the NAT address it was learned for: another one starts again at 4500.
  m.mutable_remote_nodes(0)->set_nat_address("198.51.100.8");
  {
    Fixture f(c);
    REQUIRE(f.engine->setTunnelNextHop(IpAddress::parse("198.51.100.8").value(), MacAddress{kNatMac}).ok());
    REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
    CHECK(sentTo(f) == 4500);
  }
  // A damaged line is skipped, the others are taken.
  {
    std::ofstream out(c.nat_ports_file);
    out << "node2 not-an-address 61234\n";
  }
  m.mutable_remote_nodes(0)->set_nat_address(kNat);
  {
    Fixture f(c);
    start(f);
    CHECK(sentTo(f) == 4500);
  }
}


TEST_CASE("engine ipsec: the tunnel MTU with NAT traversal is 8 bytes under ESP's, and its largest packet fills the underlay",
          "[engine][ipsec][natt]") {
  const bool nat_t = GENERATE(false, true);
  CAPTURE(nat_t);
  const uint32_t mtu = nat_t ? 1400 : 1408;  // overlay/mtu.h on a 1500 underlay with the OVN option
  Fixture f;
  auto m = ipsecModel(true);
  m.mutable_node()->set_ipsec_nat_traversal(nat_t);
  m.mutable_node()->set_pod_mtu(1500);  // larger than the tunnel carries: the underlay decides
  REQUIRE(fullSync(*f.engine, m, 2).status() == dpv1::OK);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1234, mtu + 1 - 28, true));
  CHECK(Fixture::drain(kUplink).empty());
  auto icmp = Fixture::drain(kRepA);
  REQUIRE(icmp.size() == 1);
  overlay::ParsedPacket p;
  REQUIRE(overlay::parsePacket(icmp[0], p) == overlay::Status::kOk);
  CHECK(icmp[0][p.l4_offset + 1] == overlay::icmp::kCodeFragNeeded);
  CHECK(overlay::load16(icmp[0].data() + p.l4_offset + 6) == mtu);
  f.inject(kRepA, udp4(kRouterMac, kMacA, "10.244.1.5", "10.244.2.7", 64, 1234, mtu - 28, true));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(out[0].size() == 14 + 1500);
  CHECK(out[0][14 + 9] == (nat_t ? overlay::ipproto::kUdp : overlay::ipproto::kEsp));
}

}  // namespace engine_test
