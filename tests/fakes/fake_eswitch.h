// FakeEswitch: an OffloadBackend with the state of a real eswitch and no
// device — a rule table of limited capacity, the item and action kinds its
// "hardware" supports, per-rule counters that tests bump to simulate traffic
// hitting the NIC, and aging on a clock the test advances. The offload manager
// and the engine run their tests against it (OVS's `dummy` offload provider
// plays the same part).
//
// It decides like the rte_flow backend: offloadFeatures() first (the same
// hardware-independent refusals, same reasons), then the profile's supported
// kinds ("fake eswitch (restrictive): action RAW_ENCAP not supported"), then
// capacity ("table full"). A TCP flow with a NAT rewrite (or tracked) needs,
// as on the rte_flow backend, its port's close punt rules for its shape
// (ClosePuntShape: FIN, SYN, RST → PORT_REPRESENTOR of the port, three places
// in the table): the first such flow makes them before its own rule, all or
// none, and they stay while the eswitch keeps its rules. PORT_REPRESENTOR to a
// port that is not on the eswitch is refused, as mlx5 refuses a port outside
// its switch domain.
//
// A dataplane restart is restart(): the process that installed the rules is
// gone and a new one uses the eswitch. Whether the rules outlive their
// process is a parameter, because on mlx5 it is a driver question nobody has
// answered on hardware; when they do, inherited() lists them to the new one.
// Traffic is modelled by forwarder(): the rule a packet of a match would hit
// (of several with the same match, the newest, as a replacement must win),
// and every install and remove is told to an observer, so a test can check
// the eswitch between any two steps.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flow/flow.h"
#include "offload/offload.h"
#include "offload/offloadable.h"

namespace dpu::offload::testing {

struct EswitchProfile {
  std::string name;
  uint32_t capacity = 0;  // rules the table holds; 0 = unlimited
  FeatureSet supported;   // item/action kinds the "hardware" takes
  uint32_t age_timeout_s = 0;  // AGE on every rule (0: no aging)
  // Datapath ports on the eswitch; empty = every port.
  std::vector<uint32_t> ports;

  // What docs/hardware.md says a BlueField (mlx5, dv_flow_en=1) takes.
  static EswitchProfile mlx5Like(uint32_t capacity = 0);
  // A NIC without tunnel offload or header rewrites: plain forwarding only.
  static EswitchProfile restrictive(uint32_t capacity = 0);
};

class FakeEswitch final : public OffloadBackend {
 public:
  explicit FakeEswitch(EswitchProfile profile);

  Capabilities capabilities() const override;
  Result<void> validate(const flow::FlowSpec& flow) override;
  Result<OffloadHandle> install(const flow::FlowSpec& flow) override;
  Result<void> remove(OffloadHandle handle) override;
  Result<HwCounters> query(OffloadHandle handle) override;
  // The rules present at the last restart() that are still there.
  std::vector<InheritedRule> inherited() override;

  // --- test controls ---
  // The dataplane process died and another took the eswitch over: with
  // `rules_survive` its rules stay, inherited by the next; without, they go
  // with it (a flush).
  void restart(bool rules_survive);
  // The rule a packet of `match` hits now (the newest of equal matches), if any.
  std::optional<OffloadHandle> forwarder(const flow::FlowMatch& match) const;
  // Called after every install ("install") and remove ("remove") that changed the table.
  using Observer = std::function<void(const std::string& op, OffloadHandle handle, const flow::FlowSpec& flow)>;
  void setObserver(Observer observer) { observer_ = std::move(observer); }
  // Traffic the "hardware" forwarded for a rule; false for an unknown handle.
  bool hit(OffloadHandle handle, uint64_t packets, uint64_t bytes);
  // The clock: idle times grow, aging reports rules idle past the timeout.
  void advance(uint32_t seconds);
  // Rules idle for at least the profile's AGE timeout (rte_flow_get_aged_flows).
  std::vector<OffloadHandle> agedRules() const;
  // The next validate/install (either) refuses with this reason, once.
  void refuseNext(std::string reason);
  // The next install that makes close punt rules fails to create them, once,
  // after the flow passed validation (a device that runs out mid-install):
  // nothing is installed. A flow that needs none, or whose port has its
  // shape's already, leaves it armed.
  void failNextPuntInstall(std::string reason);
  // The next remove fails, once (the rule stays installed).
  void failNextRemove();
  // What a port restart does to a real eswitch: every rule is gone.
  void flush();

  size_t installedCount() const { return rules_.size(); }
  // Table places in use: each flow's rule and the ports' close punt rules.
  size_t ruleCount() const;
  // The TCP flags its port's close punt rules send to software for an
  // installed flow (0: none, or an unknown handle).
  uint8_t puntFlags(OffloadHandle handle) const;
  // The ports' close punt rule sets (three rules each), in the order made.
  const std::vector<ClosePuntShape>& closePuntSets() const { return punt_sets_; }
  const flow::FlowSpec* installed(OffloadHandle handle) const;
  // The handle of the installed rule for this flow (the first, if several).
  std::optional<OffloadHandle> find(const flow::FlowSpec& flow) const;
  const EswitchProfile& profile() const { return profile_; }
  uint64_t installCalls() const { return install_calls_; }

 private:
  struct Rule {
    flow::FlowSpec flow;
    uint64_t packets = 0;
    uint64_t bytes = 0;
    uint64_t last_hit = 0;  // clock seconds
    bool inherited = false; // present at the last restart()
    uint8_t punt_flags = 0;  // closePuntFlags: what its port's punt rules send to software
  };
  static constexpr size_t kPuntRulesPerSet = 3;  // FIN, SYN, RST
  Result<void> check(const flow::FlowSpec& flow);
  // The shape whose punt rules `flow` needs and its port lacks.
  std::optional<ClosePuntShape> missingPunts(const flow::FlowSpec& flow) const;

  EswitchProfile profile_;
  std::map<uint64_t, Rule> rules_;
  std::vector<ClosePuntShape> punt_sets_;
  uint64_t next_id_ = 1;
  uint64_t now_ = 0;
  uint64_t install_calls_ = 0;
  std::optional<std::string> refuse_next_;
  std::optional<std::string> fail_next_punt_;
  bool fail_next_remove_ = false;
  Observer observer_;
};

// One dataplane process's view of a FakeEswitch: it forwards to the eswitch
// until kill(), after which every call fails as a dead process's would (its
// clean-up on the way out removes nothing). A restart test kills the old
// process, restart()s the eswitch and gives a new process a new view.
class EswitchProcess final : public OffloadBackend {
 public:
  explicit EswitchProcess(FakeEswitch& sw) : sw_(sw) {}
  void kill() { dead_ = true; }
  Capabilities capabilities() const override { return sw_.capabilities(); }
  Result<void> validate(const flow::FlowSpec& flow) override { return dead_ ? gone() : sw_.validate(flow); }
  Result<OffloadHandle> install(const flow::FlowSpec& flow) override {
    if (dead_) return Error{"the process is gone"};
    return sw_.install(flow);
  }
  Result<void> remove(OffloadHandle h) override { return dead_ ? gone() : sw_.remove(h); }
  Result<HwCounters> query(OffloadHandle h) override {
    if (dead_) return Error{"the process is gone"};
    return sw_.query(h);
  }
  std::vector<InheritedRule> inherited() override { return dead_ ? std::vector<InheritedRule>{} : sw_.inherited(); }

 private:
  static Result<void> gone() { return Error{"the process is gone"}; }
  FakeEswitch& sw_;
  bool dead_ = false;
};

}  // namespace dpu::offload::testing
