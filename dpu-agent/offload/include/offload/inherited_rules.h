// A restart's make before break (offload.h, Restart), written once for the
// offload manager and the engine: the rules a previous dataplane process left
// in the eswitch, held from the new process's start until its model has been
// offered. A flow offered that equals one of them takes that rule over
// (nothing installed or removed: its packets never leave the eswitch); one
// with the same match and other actions gets its replacement (a new rule, or
// the software path) first, and the old rule goes after; end() removes the
// rules the new model did not offer again. A rule that cannot be removed is
// kept for retryStale() (it may still forward).
//
// The backend lists what it inherited (OffloadBackend::inherited()); one that
// cannot see another process's rules (rte_flow) lists none, and all of this
// is then a no-op. Not thread-safe: the caller's control thread only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "flow/flow.h"
#include "offload/offload.h"

namespace dpu::offload {

struct ResyncResult {
  uint32_t adopted = 0;        // offered again unchanged: kept, never reinstalled
  uint32_t replaced = 0;       // offered with other actions: new rule (or software) first, then removed
  uint32_t removed = 0;        // not offered again: removed by end()
  uint32_t remove_errors = 0;  // removals that failed (retried; the rule may still forward)
};

class InheritedRules {
 public:
  explicit InheritedRules(OffloadBackend& backend) : backend_(backend) {}
  // A clean stop leaves nothing behind: the rules still held and those whose removal failed go.
  ~InheritedRules();
  InheritedRules(const InheritedRules&) = delete;
  InheritedRules& operator=(const InheritedRules&) = delete;

  // Takes the backend's inherited rules; returns how many.
  size_t begin();
  bool active() const { return active_; }
  // Held and not taken yet (they keep their places in the table).
  uint32_t left() const { return left_; }

  // The held rule with `flow`'s match, or nullptr.
  InheritedRule* find(const flow::FlowSpec& flow);
  // `rule` equals the flow offered: taken over as it is; its handle is now the caller's.
  OffloadHandle adopt(InheritedRule& rule);
  // `rule`'s replacement is in place: removed now. False when the removal failed (kept for retryStale()).
  bool replaced(InheritedRule& rule);
  // The new model has been offered: removes the rules it did not re-create.
  ResyncResult end();
  // Removals that failed, tried again; returns how many failed again.
  uint32_t retryStale();

 private:
  bool drop(InheritedRule& rule);

  OffloadBackend& backend_;
  bool active_ = false;
  std::vector<InheritedRule> rules_;                      // taken ones have handle 0
  std::unordered_multimap<uint64_t, size_t> by_match_;    // match hash → index in rules_
  uint32_t left_ = 0;
  ResyncResult result_;
  std::vector<OffloadHandle> stale_;                      // removals that failed, retried
};

}  // namespace dpu::offload
