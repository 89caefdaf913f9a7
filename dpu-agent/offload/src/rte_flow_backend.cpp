// The rte_flow backend (see rte_flow_backend.h).
#include "offload/rte_flow_backend.h"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace dpu::offload {

namespace {

// "rte_flow_validate: <PMD message> (<errno text>)". The PMD's message is the
// reason an operator sees next to the flow in `dpuctl dump-flows`.
std::string deviceError(const char* call, int ret, const rte_flow_error& error) {
  const int code = ret < 0 ? -ret : (rte_errno != 0 ? rte_errno : EINVAL);
  const std::string reason = rte_strerror(code);
  std::string s = std::string(call) + ": ";
  if (error.message != nullptr && reason != error.message) {
    s += error.message;
    s += " (" + reason + ")";
  } else {
    s += reason;
  }
  return s;
}

bool needsTtlGuard(const flow::FlowSpec& flow) {
  return std::any_of(flow.actions.begin(), flow.actions.end(),
                     [](const flow::FlowAction& a) { return a.type == flow::ActionType::kDecTtl; });
}

}  // namespace

RteFlowBackend::RteFlowBackend(const RteFlowBackendConfig& config, uint16_t proxy)
    : config_(config), proxy_port_(proxy) {}

Result<std::unique_ptr<RteFlowBackend>> RteFlowBackend::create(const RteFlowBackendConfig& config) {
  if (!rte_eth_dev_is_valid_port(config.eswitch_port)) {
    return Error{"rte_flow offload: ethdev " + std::to_string(config.eswitch_port) +
                 " does not exist; configure the eswitch port after the EAL has probed it"};
  }
  for (const auto& [dp, ethdev] : config.ports.entries()) {
    if (!rte_eth_dev_is_valid_port(ethdev)) {
      return Error{"rte_flow offload: datapath port " + std::to_string(dp) + " maps to ethdev " +
                   std::to_string(ethdev) + ", which does not exist"};
    }
  }
  if (config.rule.group == 0) {
    return Error{"rte_flow offload: flow rules must not live in group 0 (the root table); pick group >= 1"};
  }
  // The TTL guards and the close punt rules must both win over flow rules.
  if (config.rule.guard_priority >= config.rule.priority) {
    return Error{"rte_flow offload: guard_priority must be below (take precedence over) the flow priority"};
  }
  // Transfer rules go through the switch domain's proxy port. A PMD without
  // rte_flow (net_null, net_ring, af_xdp) has none: use the port itself, and
  // each rule is then refused with the PMD's reason.
  uint16_t proxy = config.eswitch_port;
  rte_flow_error error{};
  if (rte_flow_pick_transfer_proxy(config.eswitch_port, &proxy, &error) != 0) {
    proxy = config.eswitch_port;
  }
  std::unique_ptr<RteFlowBackend> backend(new RteFlowBackend(config, proxy));
  backend->config_.ports = PortMap{};
  for (const auto& [dp, ethdev] : config.ports.entries()) {
    const bool tunnel = std::find(config.tunnel_ports.begin(), config.tunnel_ports.end(), dp) !=
                        config.tunnel_ports.end();
    auto added = backend->addPort(dp, ethdev, tunnel);
    (void)added;  // ethdevs were checked above
  }
  return backend;
}

RteFlowBackend::~RteFlowBackend() {
  rte_flow_error error{};
  for (Slot& s : slots_) {
    if (s.flow == nullptr) continue;
    config_.calls.destroy(proxy_port_, s.flow, &error);
  }
  for (PortRules& r : port_rules_) destroyPortRules(r);
}

Result<void> RteFlowBackend::addPort(uint32_t datapath_port, uint16_t ethdev_port, bool tunnel_port) {
  if (!rte_eth_dev_is_valid_port(ethdev_port)) {
    return Error{"rte_flow offload: ethdev " + std::to_string(ethdev_port) + " for datapath port " +
                 std::to_string(datapath_port) + " does not exist"};
  }
  removePort(datapath_port);
  config_.ports.add(datapath_port, ethdev_port);
  port_rules_.push_back(installPortRules(datapath_port, ethdev_port, tunnel_port));
  return {};
}

void RteFlowBackend::removePort(uint32_t datapath_port) {
  config_.ports.remove(datapath_port);
  for (auto it = port_rules_.begin(); it != port_rules_.end(); ++it) {
    if (it->datapath_port == datapath_port) {
      destroyPortRules(*it);
      port_rules_.erase(it);
      return;
    }
  }
}

RteFlowBackend::PortRules RteFlowBackend::installPortRules(uint32_t datapath_port, uint16_t ethdev,
                                                           bool tunnel_port) {
  PortRules rules;
  rules.datapath_port = datapath_port;
  rules.ethdev = ethdev;
  const std::string port = "port " + std::to_string(datapath_port);
  // mlx5 gives a transfer rule without a port item the source port of the
  // port it is created on: each port needs its own jump out of the root table.
  if (config_.root_jump) {
    RteFlowRule jump = buildRootJumpRule(ethdev, config_.rule);
    rte_flow_error error{};
    rules.jump = config_.calls.create(proxy_port_, &jump.attr, jump.pattern.data(), jump.actions.data(), &error);
    if (rules.jump == nullptr) {
      rules.jump_error = "root jump rule for " + port + " (group 0 -> " + std::to_string(config_.rule.group) +
                         ") not installed: " + deviceError("rte_flow_create", -rte_errno, error);
      DPU_LOG(kWarn, "offload") << rules.jump_error << "; the port's flows stay in software";
    }
  }
  if (config_.ttl_guards) {
    for (RteFlowRule& rule : buildTtlGuardRules(ethdev, tunnel_port, config_.rule)) {
      rte_flow_error error{};
      rte_flow* f = config_.calls.create(proxy_port_, &rule.attr, rule.pattern.data(), rule.actions.data(), &error);
      if (f == nullptr) {
        rules.guard_error = "TTL guard rules on " + port + " not installed: " +
                            deviceError("rte_flow_create", -rte_errno, error);
        break;
      }
      rules.guards.push_back(f);
    }
    if (!rules.guard_error.empty()) {
      // All or nothing: a partial set would guard one IP version and not the other.
      rte_flow_error error{};
      for (rte_flow* f : rules.guards) config_.calls.destroy(proxy_port_, f, &error);
      rules.guards.clear();
    }
  }
  return rules;
}

void RteFlowBackend::destroyPortRules(PortRules& rules) {
  rte_flow_error error{};
  for (PuntSet& set : rules.punts) {
    for (rte_flow* f : set.rules) config_.calls.destroy(proxy_port_, f, &error);
  }
  rules.punts.clear();
  for (rte_flow* f : rules.guards) config_.calls.destroy(proxy_port_, f, &error);
  rules.guards.clear();
  if (rules.jump != nullptr) config_.calls.destroy(proxy_port_, rules.jump, &error);
  rules.jump = nullptr;
}

const RteFlowBackend::PortRules* RteFlowBackend::portRules(uint32_t datapath_port) const {
  for (const PortRules& r : port_rules_) {
    if (r.datapath_port == datapath_port) return &r;
  }
  return nullptr;
}

RteFlowBackend::PortRules* RteFlowBackend::portRules(uint32_t datapath_port) {
  for (PortRules& r : port_rules_) {
    if (r.datapath_port == datapath_port) return &r;
  }
  return nullptr;
}

size_t RteFlowBackend::closePuntRuleCount() const {
  size_t n = 0;
  for (const PortRules& r : port_rules_) {
    for (const PuntSet& set : r.punts) n += set.rules.size();
  }
  return n;
}

std::string RteFlowBackend::portRulesError(uint32_t datapath_port) const {
  const PortRules* r = portRules(datapath_port);
  if (r == nullptr) return "port " + std::to_string(datapath_port) + " is not on the eswitch";
  if (!r->jump_error.empty()) return r->jump_error;
  return r->guard_error;
}

Capabilities RteFlowBackend::capabilities() const {
  Capabilities caps;
  caps.backend = "rte_flow";
  caps.transfer = true;
  caps.raw_encap = true;
  caps.raw_decap = true;
  caps.set_mac = true;
  caps.dec_ttl = true;
  caps.count = config_.rule.count;
  caps.age = config_.rule.age_timeout_s > 0;
  caps.max_flows = config_.max_flows;
  return caps;
}

Result<RteFlowBackend::Prepared> RteFlowBackend::prepare(const flow::FlowSpec& flow) const {
  auto rule = buildRteFlowRule(flow, config_.ports, config_.rule);
  if (!rule) return std::move(rule).takeError();
  Prepared prepared{std::move(*rule), closePuntShape(flow), {}};
  if (prepared.punt_shape) {
    const PortRules* port = portRules(prepared.punt_shape->port);
    if (port == nullptr) return Error{"port " + std::to_string(prepared.punt_shape->port) + " is not on the eswitch"};
    const bool made = std::any_of(port->punts.begin(), port->punts.end(),
                                  [&](const PuntSet& set) { return set.shape == *prepared.punt_shape; });
    if (!made) prepared.punts = buildClosePuntRules(*prepared.punt_shape, port->ethdev, config_.rule);
  }
  return prepared;
}

Result<void> RteFlowBackend::deviceValidate(const flow::FlowSpec& flow, const Prepared& rules) const {
  const RteFlowRule& rule = rules.rule;
  rte_flow_error error{};
  const int ret = config_.calls.validate(proxy_port_, &rule.attr, rule.pattern.data(), rule.actions.data(), &error);
  if (ret != 0) return Error{deviceError("rte_flow_validate", ret, error)};
  // Without its port's close punt rules a translated connection's close would
  // never reach conntrack: the device must take them too, or the flow stays in software.
  for (const RteFlowRule& punt : rules.punts) {
    rte_flow_error perror{};
    const int pret = config_.calls.validate(proxy_port_, &punt.attr, punt.pattern.data(), punt.actions.data(), &perror);
    if (pret != 0) return Error{"close punt rule: " + deviceError("rte_flow_validate", pret, perror)};
  }
  // The device takes the rule, but without the port's root jump no packet
  // reaches it, and without its TTL guards DEC_TTL would forward expiring packets.
  const PortRules* port = portRules(flow.match.key.in_port);
  if (port != nullptr && !port->jump_error.empty()) return Error{port->jump_error};
  if (port != nullptr && !port->guard_error.empty() && needsTtlGuard(flow)) return Error{port->guard_error};
  return {};
}

Result<void> RteFlowBackend::installPunts(Prepared& prepared) {
  if (prepared.punts.empty()) return {};
  PortRules* port = portRules(prepared.punt_shape->port);
  PuntSet set{*prepared.punt_shape, {}};
  for (RteFlowRule& punt : prepared.punts) {
    rte_flow_error error{};
    rte_flow* f = config_.calls.create(proxy_port_, &punt.attr, punt.pattern.data(), punt.actions.data(), &error);
    if (f == nullptr) {
      const std::string reason = "close punt rule: " + deviceError("rte_flow_create", -rte_errno, error);
      rte_flow_error ignored{};
      for (rte_flow* made : set.rules) config_.calls.destroy(proxy_port_, made, &ignored);
      return Error{reason};
    }
    set.rules.push_back(f);
  }
  DPU_LOG(kInfo, "offload") << "close punt rules (FIN, SYN, RST) installed for "
                            << describeClosePuntShape(*prepared.punt_shape);
  port->punts.push_back(std::move(set));
  return {};
}

Result<void> RteFlowBackend::validate(const flow::FlowSpec& flow) {
  auto rules = prepare(flow);
  if (!rules) return std::move(rules).takeError();
  return deviceValidate(flow, *rules);
}

Result<OffloadHandle> RteFlowBackend::install(const flow::FlowSpec& flow) {
  auto rules = prepare(flow);
  if (!rules) return std::move(rules).takeError();
  if (auto ok = deviceValidate(flow, *rules); !ok) return std::move(ok).takeError();
  RteFlowRule& rule = rules->rule;

  uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (slots_.size() >= 0xffffffffu) return Error{"rte_flow offload: out of handles"};
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[index];
  const OffloadHandle handle{(uint64_t{slot.generation} << 32) | (uint64_t{index} + 1)};
  // Aged-flow reports (rte_flow_get_aged_flows) return this context: the handle.
  if (rule.age != nullptr) rule.age->context = reinterpret_cast<void*>(static_cast<uintptr_t>(handle.id));

  // The port's punt rules first: from the moment the flow's rule forwards in
  // the NIC, a close must already go to software.
  if (auto punts = installPunts(*rules); !punts) {
    free_slots_.push_back(index);
    return std::move(punts).takeError();
  }
  rte_flow_error error{};
  rte_flow* f = config_.calls.create(proxy_port_, &rule.attr, rule.pattern.data(), rule.actions.data(), &error);
  if (f == nullptr) {
    // The port keeps punt rules it just made: they serve the shape's next flow.
    free_slots_.push_back(index);
    return Error{deviceError("rte_flow_create", -rte_errno, error)};
  }
  slot.flow = f;
  ++installed_;
  return handle;
}

RteFlowBackend::Slot* RteFlowBackend::lookup(OffloadHandle handle) {
  const uint64_t low = handle.id & 0xffffffffu;
  if (low == 0 || low > slots_.size()) return nullptr;
  Slot& s = slots_[low - 1];
  if (s.flow == nullptr || s.generation != static_cast<uint32_t>(handle.id >> 32)) return nullptr;
  return &s;
}

Result<void> RteFlowBackend::remove(OffloadHandle handle) {
  Slot* s = lookup(handle);
  if (s == nullptr) return Error{"rte_flow offload: handle " + std::to_string(handle.id) + " is not installed"};
  rte_flow_error error{};
  const int ret = config_.calls.destroy(proxy_port_, s->flow, &error);
  if (ret != 0) return Error{deviceError("rte_flow_destroy", ret, error)};
  s->flow = nullptr;
  ++s->generation;  // a stale copy of the handle no longer resolves
  free_slots_.push_back(static_cast<uint32_t>((handle.id & 0xffffffffu) - 1));
  --installed_;
  return {};
}

Result<HwCounters> RteFlowBackend::query(OffloadHandle handle) {
  Slot* s = lookup(handle);
  if (s == nullptr) return Error{"rte_flow offload: handle " + std::to_string(handle.id) + " is not installed"};
  HwCounters out;
  if (config_.rule.count) {
    rte_flow_query_count count{};
    rte_flow_action_count conf{};
    const rte_flow_action actions[] = {{RTE_FLOW_ACTION_TYPE_COUNT, &conf}, {RTE_FLOW_ACTION_TYPE_END, nullptr}};
    rte_flow_error error{};
    const int ret = config_.calls.query(proxy_port_, s->flow, actions, &count, &error);
    if (ret != 0) return Error{deviceError("rte_flow_query(COUNT)", ret, error)};
    out.packets = count.hits_set ? count.hits : 0;
    out.bytes = count.bytes_set ? count.bytes : 0;
  }
  if (config_.rule.age_timeout_s > 0) {
    rte_flow_query_age age{};
    const rte_flow_action actions[] = {{RTE_FLOW_ACTION_TYPE_AGE, nullptr}, {RTE_FLOW_ACTION_TYPE_END, nullptr}};
    rte_flow_error error{};
    // Idle time is advisory: a PMD that cannot report it leaves it 0.
    if (config_.calls.query(proxy_port_, s->flow, actions, &age, &error) == 0 && age.sec_since_last_hit_valid) {
      out.idle_seconds = age.sec_since_last_hit;
    }
  }
  return out;
}

}  // namespace dpu::offload
