// The dataplane's mbuf pool and its layout for net_af_xdp (mbuf_pool.h).
#include "datapath/mbuf_pool.h"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

namespace dpu::datapath {
namespace {

constexpr const char* kPoolName = "dpu_mbufs";

bool namesAfXdp(const std::string& devargs) { return devargs.rfind("net_af_xdp", 0) == 0; }

bool portMayUseAfXdp(const PortConfig& port) {
  return port.kind == PortKind::kAfXdp || (port.kind == PortKind::kDevargs && namesAfXdp(port.devargs));
}

std::string poolError(const DataplaneConfig& config, const std::string& what) {
  return "cannot create the mbuf pool of " + std::to_string(config.mbuf_pool_size) + " mbufs: " + what +
         "; lower mbuf_pool_size or raise eal.memory_mb";
}

void freeMemzone(rte_mempool_memhdr*, void* opaque) { rte_memzone_free(static_cast<const rte_memzone*>(opaque)); }

struct Mapping {
  void* addr;
  size_t len;
};

void freeMapping(rte_mempool_memhdr*, void* opaque) {
  auto* m = static_cast<Mapping*>(opaque);
  ::munmap(m->addr, m->len);
  delete m;
}

// Page-sized objects in one page-aligned area (see the header): `area`'s
// memory, or an EAL memzone.
Result<rte_mempool*> createPagedPool(const DataplaneConfig& config, uint32_t page, PoolArea* area) {
  const int socket = static_cast<int>(rte_socket_id());
  rte_mempool_objsz sizes{};
  (void)rte_mempool_calc_obj_size(0, RTE_MEMPOOL_F_NO_SPREAD, &sizes);
  const uint32_t elt = page - sizes.header_size - sizes.trailer_size;
  if (elt <= sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM ||
      rte_mempool_calc_obj_size(elt, RTE_MEMPOOL_F_NO_SPREAD, nullptr) != page) {
    return Error{poolError(config, "a " + std::to_string(page) + "-byte page does not hold one mbuf")};
  }
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = static_cast<uint16_t>(elt - sizeof(rte_mbuf));
  priv.mbuf_priv_size = 0;
  // No spreading over memory channels: it would pad the object past the page.
  // Memory without IOVA (the area) is one chunk: DPDK would otherwise cut it
  // page by page, and net_af_xdp's umem starts at the first chunk.
  const unsigned flags = RTE_MEMPOOL_F_NO_SPREAD | (area != nullptr ? RTE_MEMPOOL_F_NO_IOVA_CONTIG : 0);
  rte_mempool* pool = rte_mempool_create_empty(kPoolName, config.mbuf_pool_size, elt, config.mbuf_cache_size,
                                               sizeof(priv), socket, flags);
  if (pool == nullptr) return Error{poolError(config, rte_strerror(rte_errno))};
  auto fail = [&](const std::string& what) -> Result<rte_mempool*> {
    rte_mempool_free(pool);
    return Error{poolError(config, what)};
  };
  if (int ret = rte_mempool_set_ops_byname(pool, rte_mbuf_best_mempool_ops(), nullptr); ret != 0)
    return fail(std::string("mempool ops: ") + rte_strerror(-ret));
  rte_pktmbuf_pool_init(pool, &priv);
  const size_t bytes = size_t{config.mbuf_pool_size} * page;
  if (area != nullptr) {
    auto memory = area->wait();
    if (!memory) return fail(memory.error());
    if (area->bytes() < bytes) return fail("its prepared area is smaller than the pool");
    auto mapping = std::make_unique<Mapping>(Mapping{*memory, bytes});
    const int added = rte_mempool_populate_virt(pool, *memory, bytes, page, freeMapping, mapping.get());
    if (added > 0) {
      // The chunk holds the mapping: freeing the pool unmaps it.
      mapping.release();
      area->release();
    }
    if (added < 0 || static_cast<uint32_t>(added) != config.mbuf_pool_size)
      return fail("populating it: " + std::string(added < 0 ? rte_strerror(-added) : "not every mbuf fits"));
    rte_mempool_obj_iter(pool, rte_pktmbuf_init, nullptr);
    return pool;
  }
  const rte_memzone* zone = rte_memzone_reserve_aligned("dpu_mbufs_area", bytes, socket, 0, page);
  if (zone == nullptr)
    return fail("no " + std::to_string(bytes >> 20) + " MB area for it: " + rte_strerror(rte_errno));
  const int added = rte_mempool_populate_virt(pool, static_cast<char*>(zone->addr), zone->len, page, nullptr, nullptr);
  if (added < 0 || static_cast<uint32_t>(added) != config.mbuf_pool_size) {
    auto failed = fail("populating it: " + std::string(added < 0 ? rte_strerror(-added) : "not every mbuf fits"));
    rte_memzone_free(zone);
    return failed;
  }
  // The area is freed with the pool (its first chunk starts the area).
  rte_mempool_memhdr* first = STAILQ_FIRST(&pool->mem_list);
  first->free_cb = freeMemzone;
  first->opaque = const_cast<rte_memzone*>(zone);
  rte_mempool_obj_iter(pool, rte_pktmbuf_init, nullptr);
  return pool;
}

struct Extent {
  uintptr_t lowest = UINTPTR_MAX;
  uintptr_t end = 0;
};

void objectExtent(rte_mempool* pool, void* opaque, void* obj, unsigned) {
  auto* e = static_cast<Extent*>(opaque);
  const uintptr_t start = reinterpret_cast<uintptr_t>(obj) - pool->header_size;
  e->lowest = std::min(e->lowest, start);
  e->end = std::max(e->end, start + pool->header_size + pool->elt_size + pool->trailer_size);
}

}  // namespace

bool mayUseAfXdp(const DataplaneConfig& config) {
  if (portMayUseAfXdp(config.uplink)) return true;
  if (config.management.configured && portMayUseAfXdp(config.management)) return true;
  const RepresentorConfig& r = config.representors;
  switch (r.mode) {
    case RepresentorMode::kHotplug:
      return std::find(r.backends.begin(), r.backends.end(), PortKind::kAfXdp) != r.backends.end();
    case RepresentorMode::kTemplate:
      if (namesAfXdp(r.devargs_template)) return true;
      for (const auto& [name, devargs] : r.devargs_by_name)
        if (namesAfXdp(devargs)) return true;
      return false;
    case RepresentorMode::kPreprobed: return false;
  }
  return false;
}

PoolArea::PoolArea(size_t bytes) : bytes_(bytes) {}

std::unique_ptr<PoolArea> PoolArea::prepare(const DataplaneConfig& config) {
  if (!config.eal.no_huge || !config.eal.no_pci || !mayUseAfXdp(config)) return nullptr;
  std::unique_ptr<PoolArea> area(new PoolArea(size_t{config.mbuf_pool_size} * static_cast<size_t>(getpagesize())));
  area->thread_ = std::thread([a = area.get()] { a->fault(); });
  return area;
}

void PoolArea::fault() {
  began_ = std::chrono::steady_clock::now();
  // Every page faulted in by the kernel in one call (MAP_POPULATE), which the
  // pool's population would do later and on the way to forwarding; a write
  // per page costs a fault each, 19,487 of them for the lab's pool.
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    error_ = errno;
  } else {
    memory_ = static_cast<char*>(p);
  }
  ended_ = std::chrono::steady_clock::now();
}

Result<char*> PoolArea::wait() {
  if (thread_.joinable()) thread_.join();
  if (memory_ == nullptr) return Error{"no " + std::to_string(bytes_ >> 20) + " MB for it: " + std::strerror(error_)};
  return memory_;
}

PoolArea::~PoolArea() {
  if (thread_.joinable()) thread_.join();
  if (memory_ != nullptr && !released_) ::munmap(memory_, bytes_);
}

Result<rte_mempool*> createMbufPool(const DataplaneConfig& config, PoolArea* area) {
  if (mayUseAfXdp(config)) return createPagedPool(config, static_cast<uint32_t>(getpagesize()), area);
  rte_mempool* pool = rte_pktmbuf_pool_create(kPoolName, config.mbuf_pool_size, config.mbuf_cache_size, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
  if (pool == nullptr) return Error{poolError(config, rte_strerror(rte_errno))};
  return pool;
}

std::string afXdpUmemProblem(const rte_mempool* pool) {
  auto* mp = const_cast<rte_mempool*>(pool);
  const uintptr_t page = static_cast<uintptr_t>(getpagesize());
  const rte_mempool_memhdr* first = STAILQ_FIRST(&mp->mem_list);
  if (first == nullptr) return "the mbuf pool has no memory";
  // As xdp_umem_configure computes it: from the first chunk's page, populated
  // objects of the pool's object size.
  const uintptr_t chunk = reinterpret_cast<uintptr_t>(first->addr);
  const uintptr_t base = chunk & ~(page - 1);
  const uint32_t frame = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, nullptr);
  if (frame > page) {
    return "its objects are " + std::to_string(frame) + " bytes, more than a " + std::to_string(page) +
           "-byte page, which AF_XDP allows per frame";
  }
  const uintptr_t umem_end = base + uintptr_t{mp->populated_size} * frame + (chunk - base);
  Extent extent;
  rte_mempool_obj_iter(mp, objectExtent, &extent);
  if (extent.lowest < chunk || extent.end > umem_end) {
    const uintptr_t outside = extent.end > umem_end ? extent.end - umem_end : 0;
    return "net_af_xdp's umem would leave " + std::to_string(outside / frame + 1) + " of its " +
           std::to_string(mp->populated_size) + " mbufs out (the objects are not back to back from its start), " +
           "and the kernel drops every mbuf outside it from the fill ring";
  }
  return "";
}

}  // namespace dpu::datapath
