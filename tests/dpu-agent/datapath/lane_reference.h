// What the general decap (overlay's parseGeneve) and fast parse say of an
// uplink frame, in the terms of the uplink's lane (worker_parse.h's
// tunnelLaneParse): the reference the engine tests and the lane-parse fuzz
// target hold the lane to.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "overlay/geneve.h"
#include "overlay/parse.h"
#include "worker_parse.h"

namespace dpu::datapath {

struct GeneralDecap {
  bool took = false;  // the general path would decapsulate it and fast-parse the inner frame as IPv4
  CompactKey key{};       // with the tunnel folded in, as the lane's (CompactKey::foldTunnel4)
  overlay::FlowKey full{};  // the inner frame's key (what the folded key expands to)
  uint32_t remote = 0;    // the outer IPv4 source, as stored
  uint16_t ingress = 0;   // the OVN option's keys
  uint16_t egress = 0;
  TunnelLanePacket lane{};
  uint32_t inner_offset = 0;
};

inline GeneralDecap generalDecap(std::span<const uint8_t> frame, const std::array<uint8_t, 16>& tunnel_ip,
                                 bool ipv4_checksum_verified, bool udp_checksum_verified, uint32_t in_port) {
  GeneralDecap r;
  overlay::GeneveDecapConfig cfg;
  cfg.ipv4_checksum_verified = ipv4_checksum_verified;
  cfg.udp_checksum_verified = udp_checksum_verified;
  overlay::GeneveHeaders gh;
  if (overlay::parseGeneve(frame, cfg, gh) != overlay::Status::kOk) return r;
  if (gh.family != overlay::UnderlayFamily::kIpv4 || gh.dst_ip != tunnel_ip || gh.oam || !gh.ovn) return r;
  const std::span<const uint8_t> inner(frame.data() + gh.inner_offset, gh.inner_length);
  overlay::ParsedPacket pf;
  overlay::FlowKey kf;
  bool long_key = false;
  if (!fastParse(inner, pf, kf, r.key, long_key, in_port, gh.vni) || pf.l3 != overlay::L3Type::kIpv4) return r;
  r.took = true;
  r.full = kf;
  r.inner_offset = gh.inner_offset;
  std::memcpy(&r.remote, gh.src_ip.data(), 4);
  r.ingress = gh.ovn->ingress;
  r.egress = gh.ovn->egress;
  // What the general path's prepare folds (its port is below 65,536).
  if (!r.key.tryFoldTunnel4(r.remote, r.ingress, r.egress)) return GeneralDecap{};
  r.lane.inner_len = static_cast<uint16_t>(gh.inner_length);
  r.lane.ip_len = static_cast<uint16_t>(pf.l3_end - overlay::eth::kHeaderLen);
  return r;
}

}  // namespace dpu::datapath
