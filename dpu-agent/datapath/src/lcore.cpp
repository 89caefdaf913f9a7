// Worker lcore loops and their port lists (lcore.h).
#include "datapath/lcore.h"

#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "datapath/engine.h"

namespace dpu::datapath {
namespace {
constexpr uint16_t kBurst = 32;
}

WorkerSet::WorkerSet(Engine& engine, unsigned workers, uint32_t idle_sleep_us)
    : engine_(engine), idle_sleep_us_(idle_sleep_us) {
  for (unsigned i = 0; i < workers; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->index = i;
    slot->owner = this;
    slot->ports.store(new std::vector<uint16_t>(), std::memory_order_seq_cst);
    slots_.push_back(std::move(slot));
  }
}

WorkerSet::~WorkerSet() {
  stop();
  for (auto& s : slots_) delete s->ports.load();
}

int WorkerSet::loop(void* arg) {
  Slot& slot = *static_cast<Slot*>(arg);
  WorkerSet& self = *slot.owner;
  WorkerContext& worker = self.engine_.worker(slot.index);
  rte_mbuf* packets[kBurst];
  while (!self.stop_.load(std::memory_order_relaxed)) {
    const std::vector<uint16_t>* ports = slot.ports.load(std::memory_order_seq_cst);
    unsigned received = 0;
    for (uint16_t port : *ports) {
      uint16_t n = rte_eth_rx_burst(port, 0, packets, kBurst);
      if (n == 0) continue;
      received += n;
      self.engine_.processBurst(worker, port, packets, n);
    }
    self.engine_.flush(worker);
    self.engine_.quiescent(worker);
    // From here the list read above is no longer used.
    slot.epoch.fetch_add(1, std::memory_order_seq_cst);
    if (received == 0 && self.idle_sleep_us_ > 0) usleep(self.idle_sleep_us_);
  }
  return 0;
}

Result<void> WorkerSet::start() {
  if (started_) return {};
  stop_.store(false);
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  for (auto& slot : slots_) {
    if (lcore >= RTE_MAX_LCORE) {
      stop();
      return Error{"not enough worker lcores for " + std::to_string(slots_.size()) + " workers"};
    }
    slot->lcore = lcore;
    slot->running.store(true);
    if (int ret = rte_eal_remote_launch(&WorkerSet::loop, slot.get(), lcore); ret != 0) {
      slot->running.store(false);
      stop();
      return Error{"cannot launch worker on lcore " + std::to_string(lcore) + ": error " + std::to_string(ret)};
    }
    lcore = rte_get_next_lcore(lcore, 1, 0);
  }
  started_ = true;
  return {};
}

void WorkerSet::stop() {
  stop_.store(true);
  for (auto& slot : slots_) {
    if (slot->running.load()) {
      rte_eal_wait_lcore(slot->lcore);
      slot->running.store(false);
    }
  }
  started_ = false;
}

void WorkerSet::publish(Slot& slot, std::vector<uint16_t> ports) {
  auto* fresh = new std::vector<uint16_t>(std::move(ports));
  const std::vector<uint16_t>* old = slot.ports.exchange(fresh, std::memory_order_seq_cst);
  if (slot.running.load()) {
    uint64_t seen = slot.epoch.load(std::memory_order_seq_cst);
    while (slot.epoch.load(std::memory_order_seq_cst) == seen && slot.running.load() && !stop_.load())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  delete old;
}

unsigned WorkerSet::assign(uint16_t port) {
  if (int w = workerOf(port); w >= 0) return static_cast<unsigned>(w);
  Slot* best = slots_.front().get();
  for (auto& s : slots_) {
    if (s->ports.load()->size() < best->ports.load()->size()) best = s.get();
  }
  std::vector<uint16_t> next = *best->ports.load();
  next.push_back(port);
  publish(*best, std::move(next));
  return best->index;
}

void WorkerSet::unassign(uint16_t port) {
  for (auto& s : slots_) {
    const auto* current = s->ports.load();
    if (std::find(current->begin(), current->end(), port) == current->end()) continue;
    std::vector<uint16_t> next;
    for (uint16_t p : *current)
      if (p != port) next.push_back(p);
    publish(*s, std::move(next));
  }
}

void WorkerSet::waitQuiescent() {
  std::vector<uint64_t> seen;
  for (auto& s : slots_) seen.push_back(s->epoch.load());
  for (size_t i = 0; i < slots_.size(); ++i) {
    while (slots_[i]->running.load() && !stop_.load() && slots_[i]->epoch.load() == seen[i])
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int WorkerSet::workerOf(uint16_t port) const {
  for (auto& s : slots_) {
    const auto* current = s->ports.load();
    if (std::find(current->begin(), current->end(), port) != current->end()) return static_cast<int>(s->index);
  }
  return -1;
}

uint64_t WorkerSet::iterations(unsigned worker) const { return slots_.at(worker)->epoch.load(); }

}  // namespace dpu::datapath
