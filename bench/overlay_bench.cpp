// Per-packet cost of the overlay transforms on one core: Geneve encap and
// decap, ESP encrypt and decrypt (AES-GCM-128/256 on every available backend),
// NAT rewrite and flow-key extraction, at 64, 512 and 1400 bytes.
//
// Each figure is the median over runs of a pass over a pool of 256 packets
// (about what a few bursts keep in cache), with the pool reset untimed between
// passes. Output lines, read by bench/report_overlay.py:
//   RESULT <transform> <backend> <key bits> <bytes> <ns/packet> <Gbit/s>
// The size is the frame handed to Geneve or NAT, and the IP packet handed to
// ESP (what a dataplane encrypts: the outer IPv4/UDP/Geneve packet).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "overlay/buffer.h"
#include "overlay/esp.h"
#include "overlay/flow_key.h"
#include "overlay/geneve.h"
#include "overlay/nat.h"
#include "overlay/packet_builder.h"
#include "overlay/parse.h"

namespace dpu::bench {
namespace {

using namespace dpu::overlay;

constexpr size_t kPool = 256;
constexpr uint32_t kHeadroom = 256;
constexpr uint32_t kRoom = 2048;
constexpr uint32_t kSizes[] = {64, 512, 1400};

int g_runs = 9;

// A pool of packet buffers, each holding a copy of `frame` at kHeadroom.
struct Pool {
  std::vector<uint8_t> storage = std::vector<uint8_t>(kPool * kRoom);
  std::vector<PacketBuffer> packets = std::vector<PacketBuffer>(kPool);
  uint32_t length = 0;

  void fill(const std::vector<uint8_t>& frame) {
    length = static_cast<uint32_t>(frame.size());
    for (size_t i = 0; i < kPool; ++i) std::memcpy(&storage[i * kRoom + kHeadroom], frame.data(), frame.size());
    resetViews();
  }
  void resetViews() {
    for (size_t i = 0; i < kPool; ++i) packets[i] = PacketBuffer(&storage[i * kRoom], kRoom, kHeadroom, length);
  }
  uint8_t* at(size_t i) { return &storage[i * kRoom + kHeadroom]; }
};

void report(const char* op, const char* backend, int bits, uint32_t size, const Measurement& m) {
  double gbps = size * 8.0 / m.ns_per_op;
  std::printf("RESULT %s %s %d %u %.2f %.3f\n", op, backend, bits, size, m.ns_per_op, gbps);
  std::fflush(stdout);
  std::fprintf(stderr, "  %-16s %-9s %3d %5u B  %8.1f ns  %7.2f Gbit/s\n", op, backend, bits, size, m.ns_per_op,
               gbps);
}

// An Ethernet/IPv4/UDP frame of exactly `size` bytes (a pod's packet).
std::vector<uint8_t> innerFrame(uint32_t size) {
  PacketBuilder b;
  b.ethernet({0x02, 0, 0, 0, 0, 0x0a}, {0x02, 0, 0, 0, 0, 0x0b})
      .ipv4({.src = 0x0af40105, .dst = 0x0af40207})
      .udp(40000, 5201);
  const uint32_t headers = 14 + 20 + 8;
  b.payload(std::vector<uint8_t>(size > headers ? size - headers : 0, 0x5a));
  return b.build();
}

// An Ethernet/IPv4/TCP frame of `size` bytes, for NAT.
std::vector<uint8_t> tcpFrame(uint32_t size) {
  PacketBuilder b;
  b.ethernet({0x02, 0, 0, 0, 0, 0x0a}, {0x02, 0, 0, 0, 0, 0x0b})
      .ipv4({.src = 0x0af40105, .dst = 0x0a60000a})
      .tcp({.src_port = 40000, .dst_port = 80, .flags = tcp::kFlagAck});
  const uint32_t headers = 14 + 20 + 20;
  b.payload(std::vector<uint8_t>(size > headers ? size - headers : 0, 0x5a));
  return b.build();
}

GeneveTunnel tunnelTo() {
  GeneveTunnel t;
  t.src_mac = {0x02, 0, 0, 0, 1, 1};
  t.dst_mac = {0x02, 0, 0, 0, 2, 2};
  t.src_ip = {192, 168, 100, 1};
  t.dst_ip = {192, 168, 100, 2};
  t.vni = 1;
  return t;
}

void benchGeneve() {
  std::array<uint8_t, kOvnOptionDataLen> ovn_data{};
  GeneveOption ovn;
  makeOvnOption({5, 7}, ovn_data, ovn);
  GeneveTunnel tunnel = tunnelTo();
  tunnel.options = {&ovn, 1};
  GeneveEncapTemplate encap;
  if (encap.build(tunnel) != Status::kOk) std::abort();

  for (uint32_t size : kSizes) {
    Pool pool;
    pool.fill(innerFrame(size));
    auto m = measure([&] { pool.resetViews(); },
                     [&](size_t i) { keep(encap.encap(pool.packets[i], static_cast<uint32_t>(i * 2654435761u))); },
                     kPool, g_runs);
    report("geneve-encap", "-", 0, size, m);

    // Decap: a pool of encapsulated packets; decap only moves the view.
    PacketBuffer sample = pool.packets[0];
    std::vector<uint8_t> outer(sample.data(), sample.data() + sample.size());
    Pool encapsulated;
    encapsulated.fill(outer);
    GeneveDecapConfig config;
    // One result struct reused across packets, as an lcore keeps it in its context.
    GeneveHeaders h;
    auto d = measure([&] { encapsulated.resetViews(); },
                     [&](size_t i) { keep(decapGeneve(encapsulated.packets[i], config, h)); },
                     kPool, g_runs);
    report("geneve-decap", "-", 0, size, d);
  }
}

// An IPv4/UDP packet to port 6081 of exactly `size` bytes: what ESP transport
// mode protects between two DPUs (the outer packet of a Geneve tunnel). Its
// content does not change the cost; its size does.
std::vector<uint8_t> outerIpPacket(uint32_t size) {
  PacketBuilder b;
  b.ipv4({.src = 0xc0a86401, .dst = 0xc0a86402}).udp(49152, kGeneveUdpPort, false);
  const uint32_t headers = 20 + 8;
  b.payload(std::vector<uint8_t>(size > headers ? size - headers : 0, 0x5a));
  return b.build();
}

EspSaConfig saConfig(AeadBackend backend, int bits) {
  EspSaConfig c;
  c.spi = 0x1000;
  c.key.assign(bits / 8, 0x42);
  c.salt = {1, 2, 3, 4};
  c.esn = true;
  c.backend = backend;
  return c;
}

void benchEsp() {
  for (AeadBackend backend : availableAeadBackends()) {
    const std::string name(aeadBackendName(backend));
    for (int bits : {128, 256}) {
      for (uint32_t size : kSizes) {
        std::vector<uint8_t> plain = outerIpPacket(size);
        const uint32_t ip_len = static_cast<uint32_t>(plain.size());
        Pool pool;
        pool.fill(plain);
        auto out = EspOutboundSa::create(saConfig(backend, bits));
        if (!out) {
          std::fprintf(stderr, "cannot create SA: %s\n", out.error().c_str());
          std::exit(1);
        }
        // Encrypt moves the IP header in front of the ESP header: restore the
        // 20 header bytes and the views untimed before each pass.
        auto enc = measure(
            [&] {
              for (size_t i = 0; i < kPool; ++i) std::memcpy(pool.at(i), plain.data(), 20);
              pool.resetViews();
            },
            [&](size_t i) { keep(out->encrypt(pool.packets[i])); }, kPool, g_runs);
        report("esp-encrypt", name.c_str(), bits, ip_len, enc);

        // Decrypt: a pool of distinct sequence numbers, re-made untimed before
        // each pass together with a fresh inbound SA (its replay window).
        std::vector<std::vector<uint8_t>> sealed(kPool);
        std::vector<uint8_t> storage(kRoom);
        auto makeSealed = [&] {
          for (size_t i = 0; i < kPool; ++i) {
            PacketBuffer p(storage.data(), kRoom, kHeadroom, ip_len);
            std::memcpy(p.data(), plain.data(), ip_len);
            if (out->encrypt(p) != Status::kOk) std::abort();
            sealed[i].assign(p.data(), p.data() + p.size());
          }
        };
        Pool cipher;
        std::optional<EspInboundSa> in;
        auto dec = measure(
            [&] {
              makeSealed();
              cipher.length = static_cast<uint32_t>(sealed[0].size());
              for (size_t i = 0; i < kPool; ++i) std::memcpy(cipher.at(i), sealed[i].data(), sealed[i].size());
              cipher.resetViews();
              auto created = EspInboundSa::create(saConfig(backend, bits));
              if (!created) std::abort();
              in.emplace(std::move(created.value()));
            },
            [&](size_t i) {
              Status s = in->decrypt(cipher.packets[i]);
              if (s != Status::kOk) std::abort();
            },
            kPool, g_runs);
        report("esp-decrypt", name.c_str(), bits, ip_len, dec);
      }
    }
  }
}

void benchNat() {
  for (uint32_t size : kSizes) {
    std::vector<uint8_t> frame = tcpFrame(size);
    Pool pool;
    pool.fill(frame);
    ParsedPacket parsed;
    if (parsePacket(frame, parsed) != Status::kOk) std::abort();
    // SNAT of address and port, as a conntrack entry applies it; the dataplane
    // parsed the packet already for its flow lookup.
    auto m = measure([&] { pool.resetViews(); },
                     [&](size_t i) {
                       std::span<uint8_t> bytes = pool.packets[i].bytes();
                       keep(setIpv4Src(bytes, parsed, 0xc0a86401u + static_cast<uint32_t>(i)));
                       keep(setL4SrcPort(bytes, parsed, static_cast<uint16_t>(30000 + i)));
                       keep(decrementTtl(bytes, parsed));
                     },
                     kPool, g_runs);
    report("nat-snat+ttl", "-", 0, size, m);

    auto k = measure([&] { pool.resetViews(); },
                     [&](size_t i) {
                       ParsedPacket p;
                       std::span<const uint8_t> bytes = pool.packets[i].bytes();
                       keep(parsePacket(bytes, p));
                       keep(flowHash32(extractFlowKey(bytes, p, 1)));
                     },
                     kPool, g_runs);
    report("parse+flow-key", "-", 0, size, k);
  }
}

}  // namespace
}  // namespace dpu::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--runs" && i + 1 < argc) {
      dpu::bench::g_runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: overlay_bench [--runs N]\n");
      return 1;
    }
  }
  dpu::bench::benchGeneve();
  dpu::bench::benchNat();
  dpu::bench::benchEsp();
  return 0;
}
