// A stub Engine for the tests of the dataplane process parts (ports, lcores,
// sockets): it records port bindings, takes the representors a FullSync or
// Delta names as wanted (a Delta deletes by representor name), counts the
// packets each port received and frees them, and asks the loop for the
// receive bursts a test sets (setRxBurst). Its logical port for
// representor R is "pod-R".
#pragma once

#include <rte_build_config.h>
#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "datapath/engine.h"

namespace dpu::datapath {
// The stub's per-worker state (the real one lives in the engine library, not linked here).
class WorkerContext {
 public:
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> iterations{0};
  std::atomic<uint64_t> per_port[RTE_MAX_ETHPORTS] = {};  // packets this worker received, by port
};
}  // namespace dpu::datapath

namespace dpu::datapath::testing {

namespace v1 = dpu::dataplane::v1;

class StubEngine final : public Engine {
 public:
  Result<void> bindPort(const std::string& name, uint16_t dpdk_port, PortRole, MacAddress) override {
    std::lock_guard lock(mu_);
    bound_[name] = dpdk_port;
    return {};
  }
  void unbindPort(const std::string& name) override {
    std::lock_guard lock(mu_);
    bound_.erase(name);
  }
  std::vector<std::string> wantedRepresentors() const override {
    std::lock_guard lock(mu_);
    return {wanted_.begin(), wanted_.end()};
  }
  std::vector<std::string> logicalPortsOf(const std::string& representor) const override {
    std::lock_guard lock(mu_);
    return wanted_.count(representor) ? std::vector<std::string>{"pod-" + representor} : std::vector<std::string>{};
  }
  v1::ProgramReply program(const v1::ProgramRequest& request) override {
    v1::ProgramReply reply;
    reply.set_status(v1::OK);
    std::lock_guard lock(mu_);
    if (request.has_full_sync()) {
      wanted_.clear();
      for (const auto& p : request.full_sync().model().ports()) wanted_.insert(p.representor());
      generation_ = request.full_sync().generation();
    } else if (request.has_delta()) {
      if (request.delta().base_generation() != generation_) {
        reply.set_status(v1::RESYNC_NEEDED);
        reply.set_generation(generation_);
        return reply;
      }
      for (const auto& name : request.delta().delete_ports()) wanted_.erase(name);
      for (const auto& p : request.delta().upsert_ports()) wanted_.insert(p.representor());
      generation_ = request.delta().generation();
    } else if (request.has_hello()) {
      reply.mutable_hello()->set_instance_id("stub");
      reply.mutable_hello()->set_generation(generation_);
    }
    reply.set_generation(generation_);
    return reply;
  }
  v1::OperatorReply operate(const v1::OperatorRequest& request) override {
    v1::OperatorReply reply;
    std::lock_guard lock(mu_);
    reply.set_generation(generation_);
    if (request.has_ports()) {
      for (const auto& [name, port] : bound_) {
        auto* p = reply.add_ports();
        p->set_name(name);
        p->set_dpdk_port(port);
        p->set_role("stub");
      }
    }
    return reply;
  }
  void maintain() override { maintained_.fetch_add(1); }
  Result<void> setTunnelNextHop(const IpAddress&, MacAddress) override { return {}; }
  std::vector<IpAddress> wantedTunnelPeers() const override { return {}; }
  size_t bytesPerFlow() const override { return 0; }
  size_t bytesPerCompactFlow() const override { return 0; }
  WorkerContext& worker(unsigned index) override { return workers_.at(index); }
  uint16_t rxBurstSize(WorkerContext&, uint16_t rx_port) override {
    return static_cast<uint16_t>(kRxBurst - cut_[rx_port].load());
  }
  // What rxBurstSize answers for `port` from now on (kRxBurst until set).
  void setRxBurst(uint16_t port, uint16_t n) { cut_[port].store(static_cast<uint16_t>(kRxBurst - n)); }
  void processBurst(WorkerContext& worker, uint16_t rx_port, rte_mbuf** packets, uint16_t count) override {
    worker.packets.fetch_add(count);
    worker.per_port[rx_port].fetch_add(count);
    per_port_[rx_port].fetch_add(count);
    rte_pktmbuf_free_bulk(packets, count);
  }
  void flush(WorkerContext&) override {}
  void quiescent(WorkerContext& worker) override { worker.iterations.fetch_add(1); }

  uint64_t received(uint16_t port) { return per_port_[port].load(); }
  std::map<std::string, uint16_t> bound() {
    std::lock_guard lock(mu_);
    return bound_;
  }
  std::atomic<uint64_t> maintained_{0};

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint16_t> bound_;
  std::set<std::string> wanted_;
  uint64_t generation_ = 0;
  std::array<WorkerContext, 4> workers_;
  std::atomic<uint64_t> per_port_[RTE_MAX_ETHPORTS] = {};
  std::atomic<uint16_t> cut_[RTE_MAX_ETHPORTS] = {};  // kRxBurst less what rxBurstSize answers
};

}  // namespace dpu::datapath::testing
