// A restart's make before break (inherited_rules.h).
#include "offload/inherited_rules.h"

#include <algorithm>

#include "overlay/flow_key.h"

namespace dpu::offload {

InheritedRules::~InheritedRules() {
  for (const InheritedRule& rule : rules_) {
    if (rule.handle.id != 0) (void)backend_.remove(rule.handle);
  }
  for (const OffloadHandle& h : stale_) (void)backend_.remove(h);
}

size_t InheritedRules::begin() {
  rules_ = backend_.inherited();
  by_match_.clear();
  for (size_t i = 0; i < rules_.size(); ++i) by_match_.emplace(overlay::flowHash64(rules_[i].flow.match.key), i);
  left_ = static_cast<uint32_t>(rules_.size());
  result_ = {};
  active_ = true;
  return rules_.size();
}

InheritedRule* InheritedRules::find(const flow::FlowSpec& flow) {
  if (!active_) return nullptr;
  auto [first, last] = by_match_.equal_range(overlay::flowHash64(flow.match.key));
  for (auto it = first; it != last; ++it) {
    InheritedRule& rule = rules_[it->second];
    if (rule.handle.id != 0 && rule.flow.match == flow.match) return &rule;
  }
  return nullptr;
}

OffloadHandle InheritedRules::adopt(InheritedRule& rule) {
  const OffloadHandle handle = rule.handle;
  rule.handle = {};
  --left_;
  ++result_.adopted;
  return handle;
}

bool InheritedRules::drop(InheritedRule& rule) {
  const bool removed = backend_.remove(rule.handle).ok();
  if (!removed) {
    ++result_.remove_errors;
    stale_.push_back(rule.handle);
  }
  rule.handle = {};
  --left_;
  return removed;
}

bool InheritedRules::replaced(InheritedRule& rule) {
  ++result_.replaced;
  return drop(rule);
}

ResyncResult InheritedRules::end() {
  // Only now, after every replacement is in place, does what the new model
  // did not re-create go.
  for (InheritedRule& rule : rules_) {
    if (rule.handle.id != 0 && drop(rule)) ++result_.removed;
  }
  rules_.clear();
  by_match_.clear();
  left_ = 0;
  active_ = false;
  return result_;
}

uint32_t InheritedRules::retryStale() {
  uint32_t failed = 0;
  std::erase_if(stale_, [&](const OffloadHandle& h) {
    if (backend_.remove(h)) return true;
    ++failed;
    return false;
  });
  return failed;
}

}  // namespace dpu::offload
