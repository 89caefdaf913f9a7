// The logical model with change tracking (see logical_model.h).
#include "control/logical_model.h"

#include <google/protobuf/util/message_differencer.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace dpu::control {
namespace {

using google::protobuf::util::MessageDifferencer;

// Bits [from, to) of an address, most significant first (to - from <= 63).
uint64_t bitsOf(const IpAddress& a, unsigned from, unsigned to) {
  uint64_t v = 0;
  for (unsigned b = from; b < to; ++b) {
    v = (v << 1) | ((a.bytes[b / 8] >> (7 - b % 8)) & 1u);
  }
  return v;
}

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

template <typename Map>
bool upsertInto(Map& map, const std::string& key, const typename Map::mapped_type& value) {
  auto it = map.find(key);
  if (it != map.end() && MessageDifferencer::Equals(it->second, value)) return false;
  map[key] = value;
  return true;
}

}  // namespace

uint32_t datapathKeyFor(const IpPrefix& subnet, const std::vector<IpPrefix>& cluster_cidrs) {
  constexpr uint32_t kIndexBits = 20;
  for (size_t i = 0; i < cluster_cidrs.size() && i < 7; ++i) {
    const IpPrefix& cc = cluster_cidrs[i];
    if (cc.address.family != subnet.address.family || !cc.contains(subnet.address) || subnet.length < cc.length) continue;
    unsigned width = subnet.length - cc.length;
    if (width > kIndexBits) continue;
    uint64_t index = bitsOf(subnet.address, cc.length, subnet.length);
    if (index + 1 >= (uint64_t{1} << kIndexBits)) continue;
    return static_cast<uint32_t>((i << kIndexBits) + index + 1);
  }
  return (1u << 23) | (fnv1a(subnet.str()) & ((1u << 23) - 1));
}

ModelState::ModelState() : change_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

ModelState::~ModelState() {
  if (change_fd_ >= 0) ::close(change_fd_);
}

void ModelState::signalChange() const {
  const uint64_t one = 1;
  if (change_fd_ >= 0) (void)!::write(change_fd_, &one, sizeof one);
}

void ModelState::clearChangeFd() const {
  uint64_t count = 0;
  if (change_fd_ >= 0) (void)!::read(change_fd_, &count, sizeof count);
}

void ModelState::notifyAll() const {
  cv_.notify_all();
  signalChange();
}

void ModelState::markLocked() {
  if (!oldest_) oldest_ = Clock::now();
  ++sequence_;
  cv_.notify_all();
  signalChange();
}

void ModelState::setNode(const dpv1::NodeSettings& node) {
  std::lock_guard lock(mu_);
  if (node_ && MessageDifferencer::Equals(*node_, node)) return;
  node_ = node;
  node_dirty_ = true;
  markLocked();
}

void ModelState::setNodeIpsec(bool encrypt) {
  std::lock_guard lock(mu_);
  if (!node_ || node_->ipsec() == encrypt) return;
  node_->set_ipsec(encrypt);
  node_dirty_ = true;
  markLocked();
}

bool ModelState::upsertPortLocked(const dpv1::LogicalPort& port) {
  if (!upsertInto(ports_, port.name(), port)) return false;
  dirty_ports_.insert(port.name());
  return true;
}

bool ModelState::setPortPolicyLocked(const std::string& port, const std::optional<dpv1::PortPolicy>& policy) {
  if (!policy) {
    if (!port_policies_.erase(port)) return false;
  } else if (!upsertInto(port_policies_, port, *policy)) {
    return false;
  }
  dirty_policies_.insert(port);
  return true;
}

void ModelState::upsertPort(const dpv1::LogicalPort& port) {
  std::lock_guard lock(mu_);
  if (!upsertPortLocked(port)) return;
  markLocked();
  port_sequence_[port.name()] = sequence_;
}

void ModelState::upsertPort(const dpv1::LogicalPort& port, const std::optional<dpv1::PortPolicy>& policy) {
  std::lock_guard lock(mu_);
  const bool port_changed = upsertPortLocked(port);
  const bool policy_changed = setPortPolicyLocked(port.name(), policy);
  if (!port_changed && !policy_changed) return;
  markLocked();
  if (port_changed) port_sequence_[port.name()] = sequence_;
}

void ModelState::deletePort(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!ports_.erase(name)) return;
  dirty_ports_.insert(name);
  (void)setPortPolicyLocked(name, std::nullopt);
  port_sequence_.erase(name);
  markLocked();
}

void ModelState::upsertPortPolicy(const dpv1::PortPolicy& policy) {
  std::lock_guard lock(mu_);
  if (setPortPolicyLocked(policy.port(), policy)) markLocked();
}

void ModelState::deletePortPolicy(const std::string& port) {
  std::lock_guard lock(mu_);
  if (setPortPolicyLocked(port, std::nullopt)) markLocked();
}

void ModelState::setPortPolicies(
    const std::vector<std::pair<std::string, std::optional<dpv1::PortPolicy>>>& policies) {
  std::lock_guard lock(mu_);
  bool changed = false;
  for (const auto& [port, policy] : policies) changed = setPortPolicyLocked(port, policy) || changed;
  if (changed) markLocked();
}

void ModelState::upsertLocalSubnet(const dpv1::Subnet& subnet) {
  std::lock_guard lock(mu_);
  if (!upsertInto(local_subnets_, subnet.cidr(), subnet)) return;
  dirty_subnets_.insert(subnet.cidr());
  markLocked();
}

void ModelState::deleteLocalSubnet(const std::string& cidr) {
  std::lock_guard lock(mu_);
  if (!local_subnets_.erase(cidr)) return;
  dirty_subnets_.insert(cidr);
  markLocked();
}

void ModelState::upsertRemoteNode(const dpv1::RemoteNode& node) {
  std::lock_guard lock(mu_);
  if (!upsertInto(remote_nodes_, node.name(), node)) return;
  dirty_remotes_.insert(node.name());
  markLocked();
}

void ModelState::deleteRemoteNode(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!remote_nodes_.erase(name)) return;
  dirty_remotes_.insert(name);
  markLocked();
}

void ModelState::upsertIpsecSa(const dpv1::IpsecSa& sa) {
  std::lock_guard lock(mu_);
  if (!upsertInto(ipsec_sas_, sa.name(), sa)) return;
  dirty_sas_.insert(sa.name());
  markLocked();
}

void ModelState::deleteIpsecSa(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!ipsec_sas_.erase(name)) return;
  dirty_sas_.insert(name);
  markLocked();
}

void ModelState::setIpsecSas(const std::map<std::string, dpv1::IpsecSa>& sas) {
  std::lock_guard lock(mu_);
  bool changed = false;
  for (auto it = ipsec_sas_.begin(); it != ipsec_sas_.end();) {
    if (sas.count(it->first)) {
      ++it;
      continue;
    }
    dirty_sas_.insert(it->first);
    it = ipsec_sas_.erase(it);
    changed = true;
  }
  for (const auto& [name, sa] : sas) {
    if (!upsertInto(ipsec_sas_, name, sa)) continue;
    dirty_sas_.insert(name);
    changed = true;
  }
  if (changed) markLocked();
}

void ModelState::upsertService(const dpv1::Service& service) {
  std::lock_guard lock(mu_);
  if (!upsertInto(services_, service.name(), service)) return;
  dirty_services_.insert(service.name());
  markLocked();
}

void ModelState::deleteService(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!services_.erase(name)) return;
  dirty_services_.insert(name);
  markLocked();
}

dpv1::LogicalModel ModelState::snapshot() const {
  std::lock_guard lock(mu_);
  dpv1::LogicalModel m;
  if (node_) *m.mutable_node() = *node_;
  for (const auto& [k, v] : local_subnets_) *m.add_local_subnets() = v;
  for (const auto& [k, v] : ports_) *m.add_ports() = v;
  for (const auto& [k, v] : remote_nodes_) *m.add_remote_nodes() = v;
  for (const auto& [k, v] : ipsec_sas_) *m.add_ipsec_sas() = v;
  for (const auto& [k, v] : services_) *m.add_services() = v;
  for (const auto& [k, v] : port_policies_) *m.add_port_policies() = v;
  return m;
}

dpv1::LogicalModel ModelState::snapshotAndClear(std::optional<Clock::time_point>* oldest_pending,
                                                uint64_t* sequence) {
  std::lock_guard lock(mu_);
  if (sequence) *sequence = sequence_;
  dpv1::LogicalModel m;
  if (node_) *m.mutable_node() = *node_;
  for (const auto& [k, v] : local_subnets_) *m.add_local_subnets() = v;
  for (const auto& [k, v] : ports_) *m.add_ports() = v;
  for (const auto& [k, v] : remote_nodes_) *m.add_remote_nodes() = v;
  for (const auto& [k, v] : ipsec_sas_) *m.add_ipsec_sas() = v;
  for (const auto& [k, v] : services_) *m.add_services() = v;
  for (const auto& [k, v] : port_policies_) *m.add_port_policies() = v;
  if (oldest_pending) *oldest_pending = oldest_;
  node_dirty_ = false;
  dirty_ports_.clear();
  dirty_subnets_.clear();
  dirty_remotes_.clear();
  dirty_sas_.clear();
  dirty_services_.clear();
  dirty_policies_.clear();
  oldest_.reset();
  return m;
}

std::optional<ModelState::Pending> ModelState::takePending() {
  std::lock_guard lock(mu_);
  if (!oldest_) return std::nullopt;
  Pending p;
  p.oldest = *oldest_;
  p.sequence = sequence_;
  if (node_dirty_ && node_) {
    *p.delta.mutable_node() = *node_;
    ++p.changes;
  }
  for (const auto& name : dirty_ports_) {
    auto it = ports_.find(name);
    if (it != ports_.end()) *p.delta.add_upsert_ports() = it->second;
    else p.delta.add_delete_ports(name);
    ++p.changes;
  }
  for (const auto& cidr : dirty_subnets_) {
    auto it = local_subnets_.find(cidr);
    if (it != local_subnets_.end()) *p.delta.add_upsert_local_subnets() = it->second;
    else p.delta.add_delete_local_subnets(cidr);
    ++p.changes;
  }
  for (const auto& name : dirty_remotes_) {
    auto it = remote_nodes_.find(name);
    if (it != remote_nodes_.end()) *p.delta.add_upsert_remote_nodes() = it->second;
    else p.delta.add_delete_remote_nodes(name);
    ++p.changes;
  }
  // An outbound switch (the old SA deleted, the new one added) arrives in
  // one Delta, so the dataplane never holds two outbound SAs for a node nor none.
  for (const auto& name : dirty_sas_) {
    auto it = ipsec_sas_.find(name);
    if (it != ipsec_sas_.end()) *p.delta.add_upsert_ipsec_sas() = it->second;
    else p.delta.add_delete_ipsec_sas(name);
    ++p.changes;
  }
  for (const auto& name : dirty_services_) {
    auto it = services_.find(name);
    if (it != services_.end()) *p.delta.add_upsert_services() = it->second;
    else p.delta.add_delete_services(name);
    ++p.changes;
  }
  for (const auto& port : dirty_policies_) {
    auto it = port_policies_.find(port);
    if (it != port_policies_.end()) *p.delta.add_upsert_port_policies() = it->second;
    else p.delta.add_delete_port_policies(port);
    ++p.changes;
  }
  node_dirty_ = false;
  dirty_ports_.clear();
  dirty_subnets_.clear();
  dirty_remotes_.clear();
  dirty_sas_.clear();
  dirty_services_.clear();
  dirty_policies_.clear();
  oldest_.reset();
  if (p.changes == 0) return std::nullopt;
  return p;
}

bool ModelState::hasPending() const {
  std::lock_guard lock(mu_);
  return oldest_.has_value();
}

bool ModelState::waitForChange(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return oldest_.has_value(); });
}

size_t ModelState::portCount() const {
  std::lock_guard lock(mu_);
  return ports_.size();
}

size_t ModelState::remoteNodeCount() const {
  std::lock_guard lock(mu_);
  return remote_nodes_.size();
}

size_t ModelState::ipsecSaCount() const {
  std::lock_guard lock(mu_);
  return ipsec_sas_.size();
}

size_t ModelState::serviceCount() const {
  std::lock_guard lock(mu_);
  return services_.size();
}

size_t ModelState::portPolicyCount() const {
  std::lock_guard lock(mu_);
  return port_policies_.size();
}

}  // namespace dpu::control

namespace dpu::control {

void ModelState::acknowledge(uint64_t sequence) {
  std::lock_guard lock(mu_);
  acknowledged_ = std::max(acknowledged_, sequence);
}

void ModelState::forgetAcknowledged() {
  std::lock_guard lock(mu_);
  acknowledged_ = 0;
}

uint64_t ModelState::unacknowledgedChanges() const {
  std::lock_guard lock(mu_);
  return sequence_ > acknowledged_ ? sequence_ - acknowledged_ : 0;
}

bool ModelState::portAcknowledged(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = port_sequence_.find(name);
  return it != port_sequence_.end() && it->second <= acknowledged_;
}

}  // namespace dpu::control
