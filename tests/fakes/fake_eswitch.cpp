// FakeEswitch (see fake_eswitch.h).
#include "fake_eswitch.h"

#include <algorithm>

namespace dpu::offload::testing {

EswitchProfile EswitchProfile::mlx5Like(uint32_t capacity) {
  EswitchProfile p;
  p.name = "mlx5-like";
  p.capacity = capacity;
  p.supported = FeatureSet::all();
  p.age_timeout_s = 30;
  return p;
}

EswitchProfile EswitchProfile::restrictive(uint32_t capacity) {
  EswitchProfile p;
  p.name = "restrictive";
  p.capacity = capacity;
  p.supported = FeatureSet{}
                    .add(Feature::kItemRepresentedPort)
                    .add(Feature::kItemEth)
                    .add(Feature::kItemIpv4)
                    .add(Feature::kItemUdp)
                    .add(Feature::kItemTcp)
                    .add(Feature::kActionRepresentedPort)
                    .add(Feature::kActionDrop)
                    .add(Feature::kActionCount);
  return p;
}

FakeEswitch::FakeEswitch(EswitchProfile profile) : profile_(std::move(profile)) {}

Capabilities FakeEswitch::capabilities() const {
  Capabilities caps;
  caps.backend = "fake";
  caps.transfer = true;
  caps.raw_encap = profile_.supported.has(Feature::kActionRawEncap);
  caps.raw_decap = profile_.supported.has(Feature::kActionRawDecap);
  caps.set_mac = profile_.supported.has(Feature::kActionSetMac);
  caps.dec_ttl = profile_.supported.has(Feature::kActionDecTtl);
  caps.count = profile_.supported.has(Feature::kActionCount);
  caps.age = profile_.age_timeout_s > 0 && profile_.supported.has(Feature::kActionAge);
  caps.max_flows = profile_.capacity;
  return caps;
}

Result<void> FakeEswitch::check(const flow::FlowSpec& flow) {
  if (refuse_next_) {
    std::string reason = std::move(*refuse_next_);
    refuse_next_.reset();
    return Error{reason};
  }
  auto features = offloadFeatures(flow);
  if (!features) return std::move(features).takeError();
  FeatureSet needed = *features;
  needed.add(Feature::kActionCount);
  if (profile_.age_timeout_s > 0) needed.add(Feature::kActionAge);
  const Feature missing = firstMissing(needed, profile_.supported);
  if (missing != Feature::kCount_) {
    return Error{"fake eswitch (" + profile_.name + "): " + featureName(missing) + " not supported"};
  }
  const uint8_t punt_flags = closePuntFlags(flow);
  if (!profile_.ports.empty()) {
    auto onSwitch = [&](uint32_t port) {
      return std::find(profile_.ports.begin(), profile_.ports.end(), port) != profile_.ports.end();
    };
    // The close punt rules go back to the input port's representor: mlx5
    // takes PORT_REPRESENTOR only to a port of its switch domain.
    if (punt_flags != 0 && !onSwitch(flow.match.key.in_port)) {
      return Error{"fake eswitch (" + profile_.name + "): action PORT_REPRESENTOR to port " +
                   std::to_string(flow.match.key.in_port) + ", which is not on the eswitch"};
    }
    if (!onSwitch(flow.match.key.in_port)) {
      return Error{"input port " + std::to_string(flow.match.key.in_port) + " is not on the eswitch"};
    }
    for (const auto& a : flow.actions) {
      if (a.type == flow::ActionType::kOutput && !onSwitch(a.port)) {
        return Error{"output port " + std::to_string(a.port) + " is not on the eswitch"};
      }
    }
  }
  const size_t places = 1 + (missingPunts(flow) ? kPuntRulesPerSet : 0);
  if (profile_.capacity != 0 && ruleCount() + places > profile_.capacity) {
    return Error{"fake eswitch (" + profile_.name + "): table full (" + std::to_string(profile_.capacity) +
                 " rules)"};
  }
  return {};
}

std::optional<ClosePuntShape> FakeEswitch::missingPunts(const flow::FlowSpec& flow) const {
  auto shape = closePuntShape(flow);
  if (!shape || std::find(punt_sets_.begin(), punt_sets_.end(), *shape) != punt_sets_.end()) return std::nullopt;
  return shape;
}

Result<void> FakeEswitch::validate(const flow::FlowSpec& flow) { return check(flow); }

Result<OffloadHandle> FakeEswitch::install(const flow::FlowSpec& flow) {
  ++install_calls_;
  if (auto ok = check(flow); !ok) return std::move(ok).takeError();
  if (auto shape = missingPunts(flow)) {
    // The port's punt rules are created first; their failure leaves nothing behind.
    if (fail_next_punt_) {
      std::string reason = "close punt rule: " + std::move(*fail_next_punt_);
      fail_next_punt_.reset();
      return Error{reason};
    }
    punt_sets_.push_back(*shape);
  }
  const uint64_t id = next_id_++;
  rules_.emplace(id, Rule{flow, 0, 0, now_, false, closePuntFlags(flow)});
  if (observer_) observer_("install", OffloadHandle{id}, flow);
  return OffloadHandle{id};
}

Result<void> FakeEswitch::remove(OffloadHandle handle) {
  auto it = rules_.find(handle.id);
  if (it == rules_.end()) return Error{"fake eswitch: handle " + std::to_string(handle.id) + " is not installed"};
  if (fail_next_remove_) {
    fail_next_remove_ = false;
    return Error{"fake eswitch: rule destruction failed (injected)"};
  }
  const flow::FlowSpec flow = it->second.flow;
  rules_.erase(it);
  if (observer_) observer_("remove", handle, flow);
  return {};
}

Result<HwCounters> FakeEswitch::query(OffloadHandle handle) {
  auto it = rules_.find(handle.id);
  if (it == rules_.end()) return Error{"fake eswitch: handle " + std::to_string(handle.id) + " is not installed"};
  HwCounters c;
  c.packets = it->second.packets;
  c.bytes = it->second.bytes;
  if (profile_.age_timeout_s > 0) c.idle_seconds = static_cast<uint32_t>(now_ - it->second.last_hit);
  return c;
}

bool FakeEswitch::hit(OffloadHandle handle, uint64_t packets, uint64_t bytes) {
  auto it = rules_.find(handle.id);
  if (it == rules_.end()) return false;
  it->second.packets += packets;
  it->second.bytes += bytes;
  it->second.last_hit = now_;
  return true;
}

void FakeEswitch::advance(uint32_t seconds) { now_ += seconds; }

std::vector<OffloadHandle> FakeEswitch::agedRules() const {
  std::vector<OffloadHandle> out;
  if (profile_.age_timeout_s == 0) return out;
  for (const auto& [id, rule] : rules_) {
    if (now_ - rule.last_hit >= profile_.age_timeout_s) out.push_back(OffloadHandle{id});
  }
  return out;
}

void FakeEswitch::refuseNext(std::string reason) { refuse_next_ = std::move(reason); }

void FakeEswitch::failNextPuntInstall(std::string reason) { fail_next_punt_ = std::move(reason); }

void FakeEswitch::failNextRemove() { fail_next_remove_ = true; }

size_t FakeEswitch::ruleCount() const {
  return rules_.size() + kPuntRulesPerSet * punt_sets_.size();
}

uint8_t FakeEswitch::puntFlags(OffloadHandle handle) const {
  auto it = rules_.find(handle.id);
  return it == rules_.end() ? 0 : it->second.punt_flags;
}

void FakeEswitch::flush() {
  rules_.clear();
  punt_sets_.clear();
}

std::vector<InheritedRule> FakeEswitch::inherited() {
  std::vector<InheritedRule> out;
  for (const auto& [id, rule] : rules_) {
    if (rule.inherited) out.push_back(InheritedRule{OffloadHandle{id}, rule.flow});
  }
  return out;
}

void FakeEswitch::restart(bool rules_survive) {
  if (!rules_survive) flush();
  for (auto& [id, rule] : rules_) rule.inherited = true;
}

std::optional<OffloadHandle> FakeEswitch::forwarder(const flow::FlowMatch& match) const {
  // Ids grow with each install: the last equal match is the newest rule.
  std::optional<OffloadHandle> newest;
  for (const auto& [id, rule] : rules_) {
    if (rule.flow.match == match) newest = OffloadHandle{id};
  }
  return newest;
}

const flow::FlowSpec* FakeEswitch::installed(OffloadHandle handle) const {
  auto it = rules_.find(handle.id);
  return it == rules_.end() ? nullptr : &it->second.flow;
}

std::optional<OffloadHandle> FakeEswitch::find(const flow::FlowSpec& flow) const {
  for (const auto& [id, rule] : rules_) {
    if (rule.flow == flow) return OffloadHandle{id};
  }
  return std::nullopt;
}

}  // namespace dpu::offload::testing
