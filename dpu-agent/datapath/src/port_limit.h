// The engine's port limit. Every table the engine indexes by DPDK port id —
// per-port counters, the workers' transmit buffers and their pending-transmit
// bitset, Snapshot::slots — has kMaxPorts entries, so a port id is checked
// once (bindPort, processBurst) and is an array index from then on.
//
// The limit follows the DPDK build (RTE_MAX_ETHPORTS): 32 in Debian's DPDK,
// where every representor is an ethdev and a node runs out after 31 pods;
// far more in NVIDIA's. A build may raise it with -DDPU_MAX_PORTS=N (never
// below RTE_MAX_ETHPORTS: a port DPDK hands out must fit). The engine's tests
// are also built with 256 on top of Debian's 32 to prove nothing assumes 32:
// there, port ids beyond what this DPDK can allocate stand for ethdev
// `id % RTE_MAX_ETHPORTS` (ethdevOf), so the real ring ports behind them
// carry the packets. With the default limit ethdevOf is the identity.
#pragma once

#include <rte_build_config.h>

#include <cstdint>

#ifndef DPU_MAX_PORTS
#define DPU_MAX_PORTS RTE_MAX_ETHPORTS
#endif

namespace dpu::datapath {

inline constexpr unsigned kMaxPorts = DPU_MAX_PORTS;
static_assert(kMaxPorts >= RTE_MAX_ETHPORTS, "DPU_MAX_PORTS must cover every port id this DPDK build hands out");
static_assert(kMaxPorts <= 65536, "DPDK port ids are 16 bits");

// 64-bit words of a bitset with one bit per port.
inline constexpr unsigned kPortWords = (kMaxPorts + 63) / 64;

// The DPDK ethdev behind engine port `port` (see above).
constexpr uint16_t ethdevOf(uint16_t port) {
  if constexpr (kMaxPorts > RTE_MAX_ETHPORTS) {
    return static_cast<uint16_t>(port % RTE_MAX_ETHPORTS);
  } else {
    return port;
  }
}

}  // namespace dpu::datapath
