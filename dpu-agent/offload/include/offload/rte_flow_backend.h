// The rte_flow backend: each offloaded flow becomes one synchronous transfer
// rule on the eswitch (rte_flow_validate, then rte_flow_create), created
// through the switch domain's transfer proxy port. The translation is
// buildRteFlowRule (rte_flow_rule.h); this class owns the device side: each
// port's root jump, TTL guard and close punt rules, the handles, counters
// (COUNT, AGE) and removal. A TCP flow with a NAT rewrite (or tracked) needs
// its port's close punt rules for its shape (buildClosePuntRules): the first
// such flow makes them, all or none, before its own rule; they stay while
// the port is on the eswitch.
//
// A device refusal is a per-flow answer, never a failure of the backend: ports
// without rte_flow (af_xdp, af_packet, net_ring, net_null) refuse every rule,
// and each flow keeps running in software with the PMD's reason. This backend
// is synchronous (dv_flow_en=1); docs/hardware.md's template/async API (dv_flow_en=2)
// would be another backend behind the same interface.
//
// At start it flushes nothing (no rte_flow_flush, no port restart of its
// own): a previous dataplane's rules, if the device kept them, stay until a
// resync replaces them (offload.h, Restart). It cannot see them, though: its
// inherited() is empty, since rte_flow neither lists nor removes rules another
// process created (README: what that means on mlx5).
//
// Thread contract: the OffloadBackend one — one control thread, never an lcore.
// The EAL must be initialised and the ports configured by the caller.
#pragma once

#include <rte_flow.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "offload/offload.h"
#include "offload/rte_flow_rule.h"

namespace dpu::offload {

// The rte_flow calls the backend makes: DPDK's by default. Tests put a PMD
// with rte_flow support in their place (no such PMD runs without a NIC), to
// prove what the backend does with rules a device accepts.
struct RteFlowCalls {
  std::function<int(uint16_t, const rte_flow_attr*, const rte_flow_item*, const rte_flow_action*, rte_flow_error*)>
      validate = rte_flow_validate;
  std::function<rte_flow*(uint16_t, const rte_flow_attr*, const rte_flow_item*, const rte_flow_action*,
                          rte_flow_error*)>
      create = rte_flow_create;
  std::function<int(uint16_t, rte_flow*, rte_flow_error*)> destroy = rte_flow_destroy;
  std::function<int(uint16_t, rte_flow*, const rte_flow_action*, void*, rte_flow_error*)> query = rte_flow_query;
};

struct RteFlowBackendConfig {
  uint16_t eswitch_port = 0;  // any ethdev of the switch domain; rules go through its transfer proxy
  PortMap ports;              // the datapath ports on the eswitch (more arrive with addPort)
  std::vector<uint32_t> tunnel_ports;  // datapath ports Geneve arrives on (the uplink): guarded for inner TTL
  RteFlowRuleOptions rule;
  uint32_t max_flows = 0;     // advertised capacity; 0 = unknown
  bool root_jump = true;      // install each port's group 0 → rule.group jump
  bool ttl_guards = true;     // install each port's TTL ≤ 1 guards
  RteFlowCalls calls;         // DPDK's rte_flow functions (tests replace them)
};

class RteFlowBackend final : public OffloadBackend {
 public:
  // Fails only on a bad configuration (no such ethdev). A device that refuses
  // a port's root jump or guard rules is recorded: flows that depend on them
  // are refused with that reason.
  static Result<std::unique_ptr<RteFlowBackend>> create(const RteFlowBackendConfig& config);
  ~RteFlowBackend() override;  // destroys every rule it created

  // Hot-plugged representors. addPort installs the port's root jump and TTL
  // guards; removePort destroys them (the caller removes the port's flows first).
  Result<void> addPort(uint32_t datapath_port, uint16_t ethdev_port, bool tunnel_port = false);
  void removePort(uint32_t datapath_port);

  Capabilities capabilities() const override;
  Result<void> validate(const flow::FlowSpec& flow) override;
  Result<OffloadHandle> install(const flow::FlowSpec& flow) override;
  Result<void> remove(OffloadHandle handle) override;
  Result<HwCounters> query(OffloadHandle handle) override;

  uint16_t proxyPort() const { return proxy_port_; }
  // Why a port's root jump or TTL guards are missing ("" when installed).
  std::string portRulesError(uint32_t datapath_port) const;
  size_t installedCount() const { return installed_; }
  // Close punt rules the ports hold (three per port and shape in use).
  size_t closePuntRuleCount() const;
  // Bytes this backend keeps per installed flow (the PMD's own memory aside;
  // a port's close punt rules are per port, not per flow).
  static constexpr size_t kBookkeepingBytesPerFlow = 16;

 private:
  struct Slot {
    rte_flow* flow = nullptr;
    uint32_t generation = 0;
  };
  static_assert(sizeof(Slot) <= kBookkeepingBytesPerFlow, "kBookkeepingBytesPerFlow counts the slot");
  // One shape's close punt rules on a port (FIN, SYN, RST).
  struct PuntSet {
    ClosePuntShape shape;
    std::vector<rte_flow*> rules;
  };
  // The rules every port needs before its flows can work.
  struct PortRules {
    uint32_t datapath_port = 0;
    uint16_t ethdev = 0;
    rte_flow* jump = nullptr;
    std::vector<rte_flow*> guards;
    std::vector<PuntSet> punts;  // made by the first flow of each shape that needs them
    std::string jump_error;   // why the root jump is missing
    std::string guard_error;  // why the TTL guards are missing
  };

  explicit RteFlowBackend(const RteFlowBackendConfig& config, uint16_t proxy);
  // The flow's rule, and the close punt rules its port still needs for it
  // (none for most flows, and none once the port has them).
  struct Prepared {
    RteFlowRule rule;
    std::optional<ClosePuntShape> punt_shape;
    std::vector<RteFlowRule> punts;
  };
  Result<Prepared> prepare(const flow::FlowSpec& flow) const;
  Result<void> deviceValidate(const flow::FlowSpec& flow, const Prepared& rules) const;
  // Create the port's close punt rules of `prepared` (all or none).
  Result<void> installPunts(Prepared& prepared);
  Slot* lookup(OffloadHandle handle);
  PortRules installPortRules(uint32_t datapath_port, uint16_t ethdev, bool tunnel_port);
  void destroyPortRules(PortRules& rules);
  const PortRules* portRules(uint32_t datapath_port) const;
  PortRules* portRules(uint32_t datapath_port);

  RteFlowBackendConfig config_;
  uint16_t proxy_port_ = 0;
  std::vector<PortRules> port_rules_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  size_t installed_ = 0;
};

}  // namespace dpu::offload
