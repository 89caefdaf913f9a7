// The in-process DpuApi (see fake_dpu.h).
#include "fake_dpu.h"

namespace dpu::fakes {

namespace av1 = dpu::attach::v1;

Error FakeDpuApi::timeout(const std::string& what) const {
  return Error{"the DPU agent at " + url_ + " is unreachable (" + what + ": timed out)", ErrorCode::kUnavailable};
}

Result<av1::AttachResponse> FakeDpuApi::attach(const av1::AttachRequest& r) {
  if (auto e = faults_.check("dpu.attach")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) {
      backlog_.push_back([this, r] { (void)state_.attach(r); });
      return timeout("POST /v1/attachments");
    }
    if (lose_answer_) {
      lose_answer_ = false;
      (void)state_.attach(r);
      return timeout("POST /v1/attachments");
    }
  }
  return state_.attach(r);
}

Result<av1::DetachResponse> FakeDpuApi::detach(const av1::DetachRequest& r) {
  if (auto e = faults_.check("dpu.detach")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) {
      backlog_.push_back([this, r] { (void)state_.detach(r); });
      return timeout("POST /v1/attachments:detach");
    }
  }
  return state_.detach(r);
}

Result<av1::AttachmentList> FakeDpuApi::list() {
  if (auto e = faults_.check("dpu.list")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) return timeout("GET /v1/attachments");
  }
  return state_.list();
}

Result<av1::AttachResponse> FakeDpuApi::get(const std::string& id) {
  if (auto e = faults_.check("dpu.get")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) return timeout("GET /v1/attachments/" + id);
  }
  return state_.get(id);
}

Result<av1::Health> FakeDpuApi::health() {
  if (auto e = faults_.check("dpu.health")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) return timeout("GET /v1/health");
  }
  return state_.health();
}

Result<av1::ReconcileResponse> FakeDpuApi::reconcile(const av1::ReconcileRequest& r) {
  if (auto e = faults_.check("dpu.reconcile")) return *e;
  {
    std::lock_guard lk(mu_);
    if (hung_) {
      backlog_.push_back([this, r] { (void)state_.reconcile(r); });
      return timeout("POST /v1/attachments:reconcile");
    }
  }
  return state_.reconcile(r);
}

void FakeDpuApi::hang(bool on, bool apply_backlog) {
  {
    std::lock_guard lk(mu_);
    hung_ = on;
  }
  if (!on && apply_backlog) applyBacklog();
}

void FakeDpuApi::applyBacklog() {
  std::deque<std::function<void()>> todo;
  {
    std::lock_guard lk(mu_);
    todo.swap(backlog_);
  }
  for (auto& f : todo) f();
}

void FakeDpuApi::loseNextAttachAnswer() {
  std::lock_guard lk(mu_);
  lose_answer_ = true;
}

size_t FakeDpuApi::backlog() const {
  std::lock_guard lk(mu_);
  return backlog_.size();
}

}  // namespace dpu::fakes
