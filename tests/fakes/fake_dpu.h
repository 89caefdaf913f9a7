// FakeDpuApi: host-shim's DpuApi (host-shim/include/host-shim/dpu_client.h)
// in-process, over FakeDpuState (the fake agent's state and rules, shared with
// fake_dpu_api). Failures come from a FaultPlan ("dpu.attach", "dpu.detach",
// "dpu.list", "dpu.get", "dpu.health", "dpu.reconcile"), and it can play an agent that
// hangs: while hung every call fails as the real client does on a timeout
// (kUnavailable), but attaches and detaches are kept and applied in order at
// resume() — the agent processing its backlog after SIGCONT.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "fake_dpu_state.h"
#include "fault_plan.h"
#include "host-shim/dpu_client.h"

namespace dpu::fakes {

class FakeDpuApi final : public hostshim::DpuApi {
 public:
  FakeDpuApi(FakeDpuState& state, FaultPlan& faults) : state_(state), faults_(faults) {}

  Result<attach::v1::AttachResponse> attach(const attach::v1::AttachRequest& r) override;
  Result<attach::v1::DetachResponse> detach(const attach::v1::DetachRequest& r) override;
  Result<attach::v1::AttachmentList> list() override;
  Result<attach::v1::AttachResponse> get(const std::string& id) override;
  Result<attach::v1::Health> health() override;
  Result<attach::v1::ReconcileResponse> reconcile(const attach::v1::ReconcileRequest& r) override;
  const std::string& url() const override { return url_; }

  // Hangs (true) or answers again, first applying what arrived meanwhile
  // unless `apply_backlog` is false (the agent answers new requests before
  // its backlog: applyBacklog() later).
  void hang(bool on, bool apply_backlog = true);
  void applyBacklog();
  // The next attach takes effect on the DPU but its answer is lost (a timeout
  // after the agent acted).
  void loseNextAttachAnswer();
  size_t backlog() const;

 private:
  Error timeout(const std::string& what) const;

  FakeDpuState& state_;
  FaultPlan& faults_;
  const std::string url_ = "fake://dpu";
  mutable std::mutex mu_;
  bool hung_ = false;
  bool lose_answer_ = false;
  std::deque<std::function<void()>> backlog_;
};

}  // namespace dpu::fakes
