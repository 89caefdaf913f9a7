// Fuzz target for Geneve decapsulation (overlay/geneve.h): the bytes are an
// outer Ethernet frame as received on the uplink. Whatever decapsulates must
// re-encapsulate through a template and decapsulate again to the same VNI,
// options, OVN keys and inner frame; a difference aborts, like a crash.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "overlay/geneve.h"

using namespace dpu::overlay;

namespace {

constexpr uint32_t kHeadroom = GeneveEncapTemplate::kMaxLength + 64;

void check(bool ok) {
  if (!ok) std::abort();
}

// One option this receiver also understands, so both verdicts of RFC 8926 §3.5
// are reachable (0x0105/0x81 accepted, any other critical option dropped).
constexpr std::array<GeneveOptionKey, 2> kUnderstood{kOvnOptionKey, GeneveOptionKey{0x0105, 0x81}};

void roundTrip(PacketBuffer& packet, const GeneveHeaders& h) {
  const std::vector<uint8_t> inner(packet.data(), packet.data() + packet.size());
  // Copy the options out of the headroom that the re-encapsulation overwrites.
  std::array<std::array<uint8_t, kGeneveMaxOptionDataLen>, kGeneveMaxOptions> data{};
  std::array<GeneveOption, kGeneveMaxOptions> options{};
  for (uint32_t i = 0; i < h.option_count; ++i) {
    const GeneveOption& o = h.options[i];
    std::memcpy(data[i].data(), o.data.data(), o.data.size());
    options[i] = {o.option_class, o.type, {data[i].data(), o.data.size()}};
  }
  GeneveTunnel t;
  t.src_mac = h.src_mac;
  t.dst_mac = h.dst_mac;
  t.family = h.family;
  t.src_ip = h.src_ip;
  t.dst_ip = h.dst_ip;
  t.ttl = h.ttl;
  t.tos = h.tos;
  t.vni = h.vni;
  t.oam = h.oam;
  t.udp_checksum = h.udp_checksum;
  t.options = {options.data(), h.option_count};

  GeneveEncapTemplate tpl;
  check(tpl.build(t) == Status::kOk);
  check(tpl.encap(packet, h.src_port) == Status::kOk);

  GeneveHeaders again;
  const GeneveDecapConfig strict{.understood = kUnderstood};
  check(decapGeneve(packet, strict, again) == Status::kOk);
  check(again.vni == h.vni && again.oam == h.oam && again.family == h.family);
  check(again.src_ip == h.src_ip && again.dst_ip == h.dst_ip);
  check(again.option_count == h.option_count && again.options_len == h.options_len);
  for (uint32_t i = 0; i < h.option_count; ++i) {
    check(again.options[i].option_class == options[i].option_class && again.options[i].type == options[i].type);
    check(again.options[i].data.size() == options[i].data.size());
    check(std::memcmp(again.options[i].data.data(), options[i].data.data(), options[i].data.size()) == 0);
  }
  check(again.ovn == h.ovn);
  check(packet.size() == inner.size() && std::memcmp(packet.data(), inner.data(), inner.size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 70000) return 0;
  std::vector<uint8_t> storage(kHeadroom + size);
  if (size > 0) std::memcpy(storage.data() + kHeadroom, data, size);

  // As received, every check on: verdicts only (the checksums stop most
  // mutations early, so the next pass trusts them as a NIC would).
  GeneveHeaders h;
  const Status strict = parseGeneve({storage.data() + kHeadroom, size}, {.understood = kUnderstood}, h);

  PacketBuffer packet(storage.data(), static_cast<uint32_t>(storage.size()), kHeadroom,
                      static_cast<uint32_t>(size));
  const GeneveDecapConfig trusting{.understood = kUnderstood, .ipv4_checksum_verified = true,
                                   .udp_checksum_verified = true};
  const Status s = decapGeneve(packet, trusting, h);
  check(strict != Status::kOk || s == Status::kOk);
  if (s != Status::kOk) {
    check(packet.size() == size && packet.headroom() == kHeadroom);
    return 0;
  }
  check(h.inner_offset + h.inner_length <= size && h.inner_length == packet.size());
  // The re-encapsulation computes real checksums, so the strict decap of the
  // result must pass even where the input's checksums were wrong.
  roundTrip(packet, h);
  return 0;
}
