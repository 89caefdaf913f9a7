// The mbuf pool's budget per port. dpu-dataplane has one pool for every port
// (a packet received on one port is transmitted on another without a copy),
// and some PMDs keep a stock of its mbufs for as long as the port is open:
// net_af_xdp fills its fill ring with 2048 when the receive queue is set up,
// whatever the ring sizes asked for, and a NIC posts an mbuf per receive
// descriptor. Opened one after the other without a budget, the first ports
// take the whole pool: a later af_xdp port cannot stock its fill ring (it
// falls back to af_packet), and ports that allocate per packet (af_packet)
// find the pool empty and receive nothing.
//
// So every port is charged, before it opens, what it may hold: its PMD's stock
// and what its traffic keeps in flight (its transmit ring where the PMD holds
// sent mbufs until completion, one transmit buffer of a burst per worker). A
// port opens on a backend only if that fits what the pool has unbudgeted; the
// representor backends are chosen from it (af_xdp when it fits, af_packet,
// which holds none, otherwise). Part of the pool is never budgeted: the
// lcores' mempool caches and one receive burst per worker.
//
// Pure (no DPDK): the process (port.cpp, dataplane_ports.cpp) asks it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace dpu::datapath {

// What a port needs from the pool.
struct MbufDemand {
  uint32_t stock = 0;      // kept by the PMD while the port is open
  uint32_t in_flight = 0;  // held by its traffic at most
  uint32_t total() const { return stock + in_flight; }
  // "3136 (2048 fill ring + 1088 in flight)"
  std::string describe() const;
};

// The shapes of a port's queues that its demand depends on.
struct PortShape {
  unsigned workers = 1;        // each has a transmit buffer of a burst per port
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  uint16_t tx_queues = 1;
};

inline constexpr uint32_t kMbufBurst = 32;
// net_af_xdp (DPDK 22.11, rte_eth_af_xdp.c xsk_configure) stocks its fill ring
// with XSK_RING_CONS__DEFAULT_NUM_DESCS mbufs from the receive queue's pool.
inline constexpr uint32_t kAfXdpFillStock = 2048;

// net_af_xdp: the fill ring's stock; in flight, its socket's transmit ring
// (sized like the receive ring) holds sent mbufs until their completion.
MbufDemand afXdpDemand(const PortShape& shape);
// net_af_packet copies into the kernel's rings both ways: nothing but bursts.
MbufDemand afPacketDemand(const PortShape& shape);
// Any other device, once open: `stock` is what the pool lost while its queues
// were set up and it started (a NIC's receive descriptors); a device that is
// not a vdev keeps sent mbufs on its transmit rings until completion.
MbufDemand measuredDemand(const PortShape& shape, uint32_t stock, bool holds_tx);

// Mbufs of the pool never budgeted to a port: every lcore's mempool cache
// (which DPDK fills up to 1.5 times its size) and a receive burst per worker.
uint32_t mbufPoolReserve(unsigned workers, uint32_t cache_size);

class MbufBudget {
 public:
  MbufBudget(uint32_t pool_size, uint32_t reserve);

  uint32_t poolSize() const { return pool_size_; }
  uint32_t reserve() const { return reserve_; }
  uint32_t budgeted() const { return budgeted_; }
  uint32_t unbudgeted() const;
  bool fits(uint32_t mbufs) const { return mbufs <= unbudgeted(); }
  // Why `demand` does not fit ("" when it does), for port `name`: the numbers
  // and what to raise.
  std::string shortfall(const std::string& name, const MbufDemand& demand) const;
  // Charges `port` (replacing what it was charged before).
  void charge(const std::string& port, uint32_t mbufs);
  void release(const std::string& port);
  uint32_t of(const std::string& port) const;

 private:
  uint32_t pool_size_;
  uint32_t reserve_;
  uint32_t budgeted_ = 0;
  std::map<std::string, uint32_t> ports_;
};

}  // namespace dpu::datapath
