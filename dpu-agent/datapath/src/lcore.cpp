// Worker lcore loops and their receive queue lists (lcore.h).
#include "datapath/lcore.h"

#include <rte_launch.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "datapath/engine.h"

namespace dpu::datapath {

WorkerSet::WorkerSet(Engine& engine, unsigned workers, uint32_t idle_sleep_us)
    : engine_(engine), idle_sleep_us_(idle_sleep_us) {
  for (unsigned i = 0; i < workers; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->index = i;
    slot->owner = this;
    slot->queues.store(new std::vector<RxQueue>(), std::memory_order_seq_cst);
    slots_.push_back(std::move(slot));
  }
}

WorkerSet::~WorkerSet() {
  stop();
  for (auto& s : slots_) delete s->queues.load();
}

int WorkerSet::loop(void* arg) {
  Slot& slot = *static_cast<Slot*>(arg);
  WorkerSet& self = *slot.owner;
  WorkerContext& worker = self.engine_.worker(slot.index);
  while (!self.stop_.load(std::memory_order_relaxed)) {
    const std::vector<RxQueue>* queues = slot.queues.load(std::memory_order_seq_cst);
    const unsigned received = pollOnce(self.engine_, worker, *queues);
    // From here the list read above is no longer used.
    slot.epoch.fetch_add(1, std::memory_order_seq_cst);
    if (received == 0 && self.idle_sleep_us_ > 0) {
      usleep(self.idle_sleep_us_);
      self.engine_.awake(worker);
    }
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

void WorkerSet::publish(Slot& slot, std::vector<RxQueue> queues) {
  auto* fresh = new std::vector<RxQueue>(std::move(queues));
  const std::vector<RxQueue>* old = slot.queues.exchange(fresh, std::memory_order_seq_cst);
  if (slot.running.load()) {
    uint64_t seen = slot.epoch.load(std::memory_order_seq_cst);
    while (slot.epoch.load(std::memory_order_seq_cst) == seen && slot.running.load() && !stop_.load())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  delete old;
}

std::vector<unsigned> WorkerSet::assign(uint16_t port, uint16_t rx_queues) {
  if (std::vector<int> current = workersOf(port); !current.empty())
    return std::vector<unsigned>(current.begin(), current.end());
  std::vector<std::vector<RxQueue>> next;
  for (auto& s : slots_) next.push_back(*s->queues.load());
  auto polls = [&](size_t w) {
    return std::any_of(next[w].begin(), next[w].end(), [&](const RxQueue& q) { return q.port == port; });
  };
  std::vector<unsigned> chosen;
  for (uint16_t queue = 0; queue < std::max<uint16_t>(rx_queues, 1); ++queue) {
    size_t best = 0;
    for (size_t w = 1; w < next.size(); ++w) {
      if (next[w].size() < next[best].size() || (next[w].size() == next[best].size() && polls(best) && !polls(w)))
        best = w;
    }
    next[best].push_back({port, queue});
    chosen.push_back(static_cast<unsigned>(best));
  }
  for (size_t w = 0; w < slots_.size(); ++w) {
    if (next[w].size() != slots_[w]->queues.load()->size()) publish(*slots_[w], std::move(next[w]));
  }
  return chosen;
}

void WorkerSet::unassign(uint16_t port) {
  for (auto& s : slots_) {
    const auto* current = s->queues.load();
    std::vector<RxQueue> next;
    for (const RxQueue& q : *current)
      if (q.port != port) next.push_back(q);
    if (next.size() != current->size()) publish(*s, std::move(next));
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

int WorkerSet::workerOf(uint16_t port, uint16_t queue) const {
  for (auto& s : slots_) {
    const auto* current = s->queues.load();
    if (std::find(current->begin(), current->end(), RxQueue{port, queue}) != current->end())
      return static_cast<int>(s->index);
  }
  return -1;
}

std::vector<int> WorkerSet::workersOf(uint16_t port) const {
  std::vector<int> out;
  for (auto& s : slots_) {
    for (const RxQueue& q : *s->queues.load()) {
      if (q.port != port) continue;
      if (out.size() <= q.queue) out.resize(q.queue + 1, -1);
      out[q.queue] = static_cast<int>(s->index);
    }
  }
  return out;
}

std::vector<WorkerSet::RxQueue> WorkerSet::queuesOf(unsigned worker) const { return *slots_.at(worker)->queues.load(); }

uint64_t WorkerSet::iterations(unsigned worker) const { return slots_.at(worker)->epoch.load(); }

}  // namespace dpu::datapath
