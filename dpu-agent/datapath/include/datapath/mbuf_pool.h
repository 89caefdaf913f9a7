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
#pragma once

#include <string>

#include "common/result.h"
#include "datapath/dataplane_config.h"

struct rte_mempool;

namespace dpu::datapath {

// Whether `config` may open ports on net_af_xdp (the uplink, management port or representors).
bool mayUseAfXdp(const DataplaneConfig& config);

// The pool of config.mbuf_pool_size mbufs (page-sized ones when mayUseAfXdp).
Result<rte_mempool*> createMbufPool(const DataplaneConfig& config);

// Why net_af_xdp's umem over `pool` would not cover every mbuf ("" when it does).
std::string afXdpUmemProblem(const rte_mempool* pool);

}  // namespace dpu::datapath
