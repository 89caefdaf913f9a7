// The mbuf pool's budget per port (mbuf_budget.h).
#include "datapath/mbuf_budget.h"

namespace dpu::datapath {

std::string MbufDemand::describe() const {
  if (stock == 0) return std::to_string(total()) + " in flight";
  return std::to_string(total()) + " (" + std::to_string(stock) + " stocked + " + std::to_string(in_flight) +
         " in flight)";
}

MbufDemand afXdpDemand(const PortShape& shape) {
  return {kAfXdpFillStock, shape.rx_descriptors + kMbufBurst * shape.workers};
}

MbufDemand afPacketDemand(const PortShape& shape) { return {0, kMbufBurst * shape.workers}; }

MbufDemand measuredDemand(const PortShape& shape, uint32_t stock, bool holds_tx) {
  uint32_t in_flight = kMbufBurst * shape.workers;
  if (holds_tx) in_flight += uint32_t{shape.tx_descriptors} * shape.tx_queues;
  return {stock, in_flight};
}

uint32_t mbufPoolReserve(unsigned workers, uint32_t cache_size) {
  return (workers + 1) * (cache_size + cache_size / 2) + workers * kMbufBurst;
}

MbufBudget::MbufBudget(uint32_t pool_size, uint32_t reserve) : pool_size_(pool_size), reserve_(reserve) {}

uint32_t MbufBudget::unbudgeted() const {
  const uint64_t used = uint64_t{reserve_} + budgeted_;
  return used >= pool_size_ ? 0 : static_cast<uint32_t>(pool_size_ - used);
}

std::string MbufBudget::shortfall(const std::string& name, const MbufDemand& demand) const {
  if (fits(demand.total())) return "";
  return name + " needs " + demand.describe() + " mbufs but " + std::to_string(unbudgeted()) + " of the pool's " +
         std::to_string(pool_size_) + " are unbudgeted (" + std::to_string(budgeted_) + " budgeted to " +
         std::to_string(ports_.size()) + " ports, " + std::to_string(reserve_) +
         " kept for lcore caches and bursts); raise mbuf_pool_size by " +
         std::to_string(demand.total() - unbudgeted());
}

void MbufBudget::charge(const std::string& port, uint32_t mbufs) {
  release(port);
  ports_[port] = mbufs;
  budgeted_ += mbufs;
}

void MbufBudget::release(const std::string& port) {
  auto it = ports_.find(port);
  if (it == ports_.end()) return;
  budgeted_ -= it->second;
  ports_.erase(it);
}

uint32_t MbufBudget::of(const std::string& port) const {
  auto it = ports_.find(port);
  return it == ports_.end() ? 0 : it->second;
}

}  // namespace dpu::datapath
