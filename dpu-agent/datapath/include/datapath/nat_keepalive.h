// NAT keepalives (RFC 3948 §2.2; docs/ipsec.md "NAT traversal"): with NAT
// traversal, one datagram of one 0xff byte from our tunnel IP's UDP port
// 4500 to every remote node's ESP in UDP address and port, every
// NodeSettings.ipsec_nat_keepalive_seconds, so that a NAT on the path keeps
// the mapping of an idle pair (NATs forget idle UDP mappings after tens of
// seconds). The receiver drops and counts them (IpsecNatKeepalive).
//
// They leave through the kernel's stack on the uplink netdev, as the
// next-hop probes of dataplane_neighbours.h do: the kernel owns the tunnel
// address there and routes towards the peer's NAT address, and the datagram
// has the 5-tuple of our ESP in UDP, so it refreshes the same NAT mapping. A
// DPU whose uplink has no kernel netdev with the tunnel IP (static next hops)
// sends none: each failure is counted and said in the log once.
//
// Control thread only: tick() from the dataplane's maintenance loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"

namespace dpu::dataplane::v1 {
class OperatorReply;
}

namespace dpu::datapath {

class Engine;

class NatKeepalives {
 public:
  // `iface`: the uplink netdev to send from (empty: any, as the kernel routes).
  NatKeepalives(Engine& engine, std::string iface);
  ~NatKeepalives();
  NatKeepalives(const NatKeepalives&) = delete;
  NatKeepalives& operator=(const NatKeepalives&) = delete;

  // Sends a round when the engine's interval has passed since the last one.
  void tick(std::chrono::steady_clock::time_point now);
  // ipsec_nat_keepalives_sent, ipsec_nat_keepalive_failures (dpuctl stats, metrics).
  void addCounters(dataplane::v1::OperatorReply& reply) const;

  // The datagram's payload: one 0xff byte (RFC 3948 §2.2).
  static constexpr uint8_t kPayload = 0xff;

 private:
  bool openFor(const IpAddress& local);
  void closeSocket();

  Engine& engine_;
  std::string iface_;
  int fd_ = -1;
  IpAddress bound_{};
  std::chrono::steady_clock::time_point last_{};
  bool sent_once_ = false;
  bool warned_ = false;
  uint64_t sent_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace dpu::datapath
