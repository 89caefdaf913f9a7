// The dataplane's mbuf pool, laid out so that net_af_xdp can use all of it.
//
// net_af_xdp (zero-copy between umem and mbuf, DPDK 22.11) registers a umem
// over the pool that starts at the pool's first memory chunk and spans
// `populated_size` objects of the pool's object size: it assumes the objects
// lie back to back from the chunk's start. rte_pktmbuf_pool_create does not
// keep them so when it must not let an object cross a page: without
// hugepages each 2,368-byte mbuf takes a 4 KB page of its own, and the umem
// ends near the middle of the pool. Every mbuf beyond its end that goes into a
// fill ring is refused by the kernel and lost to the pool: a representor that
// got only such mbufs at set-up receives nothing at all, and the others lose
// mbufs with every refill until the pool runs dry.
//
// So when the config may open af_xdp ports, each object is exactly one page
// (header, mbuf and a 3,904-byte data room) in one page-aligned area: the
// umem covers every mbuf, no buffer crosses a page (AF_XDP zero-copy drivers
// refuse those) and the layout holds on 4 KB pages and hugepages alike.
// Without af_xdp the pool is DPDK's default one. afXdpUmemProblem checks the
// layout of a pool the way the PMD computes its umem.
//
// Without hugepages (eal.no_huge: the lab, CI) that area is 4 KB pages, each
// faulted in when the pool writes its object there: 64 MB for the lab's
// 16,383 mbufs, tens to hundreds of milliseconds after rte_eal_init on the
// way to forwarding, which a restart's outage pays in full. So for a pool of
// page-sized mbufs on such a dataplane, PoolArea maps anonymous memory and a
// thread of its own faults it in while rte_eal_init runs (EAL meanwhile loads
// its PMDs and, on x86 without an Intel TSC leaf, sleeps 100 ms to measure the
// TSC). That memory has no IOVA, which the vdevs (net_af_xdp, net_af_packet,
// ring, pcap, null) do not use: it is used only with eal.no_pci too, never for
// a PCI device's DMA. With hugepages the pool comes from an EAL memzone, whose
// pages are few and already there.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/result.h"
#include "datapath/dataplane_config.h"

struct rte_mempool;

namespace dpu::datapath {

// Whether `config` may open ports on net_af_xdp (the uplink, management port or representors).
bool mayUseAfXdp(const DataplaneConfig& config);

// The memory of a pool of page-sized mbufs, made ready before the pool (above).
class PoolArea {
 public:
  // Starts faulting in config.mbuf_pool_size pages on a thread; nullptr when
  // the config's pool comes from EAL (hugepages, PCI devices, no af_xdp). Call
  // it before rte_eal_init: it makes no DPDK call.
  static std::unique_ptr<PoolArea> prepare(const DataplaneConfig& config);
  ~PoolArea();  // waits for the thread; unmaps the memory unless a pool took it
  PoolArea(const PoolArea&) = delete;
  PoolArea& operator=(const PoolArea&) = delete;

  // Waits until the memory is ready: its address, or why it could not be mapped.
  Result<char*> wait();
  size_t bytes() const { return bytes_; }
  // When the thread started and finished faulting (valid once wait() returned).
  std::chrono::steady_clock::time_point began() const { return began_; }
  std::chrono::steady_clock::time_point ended() const { return ended_; }
  // The pool owns the memory from now on (and unmaps it when freed).
  void release() { released_ = true; }

 private:
  explicit PoolArea(size_t bytes);
  void fault();

  size_t bytes_;
  char* memory_ = nullptr;
  int error_ = 0;
  bool released_ = false;
  std::chrono::steady_clock::time_point began_, ended_;
  std::thread thread_;
};

// The pool of config.mbuf_pool_size mbufs (page-sized ones when mayUseAfXdp),
// in `area` when there is one (PoolArea::prepare), else in EAL's memory.
Result<rte_mempool*> createMbufPool(const DataplaneConfig& config, PoolArea* area = nullptr);

// Why net_af_xdp's umem over `pool` would not cover every mbuf ("" when it does).
std::string afXdpUmemProblem(const rte_mempool* pool);

}  // namespace dpu::datapath
