// The book of attachments and its checkpoint (see attachment_book.h). Every
// change is written before the method returns; a failed write leaves the
// book as it was, so memory never claims what the disk does not hold.
#include "host-shim/attachment_book.h"

#include <random>

#include "host-shim/checkpoint.h"

namespace dpu::hostshim {

namespace {

std::string randomHex(size_t bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

}  // namespace

std::string attachmentKey(const std::string& network, const std::string& container_id, const std::string& ifname) {
  return network + "/" + container_id + "/" + ifname;
}

std::string attachmentKey(const Attachment& a) { return attachmentKey(a.network_name(), a.container_id(), a.ifname()); }

VfKey vfKeyOf(const Attachment& a) { return VfKey{a.pf_index(), a.vf_index()}; }

AttachmentBook::AttachmentBook(Writer writer) : writer_(std::move(writer)), host_instance_(randomHex(8)) {}

void AttachmentBook::load(const checkpoint::v1::HostShimCheckpoint& cp) {
  std::lock_guard lk(mu_);
  attachments_.clear();
  returning_.clear();
  for (const auto& a : cp.attachments()) {
    if (a.returning())
      returning_[vfKeyOf(a)] = a;
    else
      attachments_[attachmentKey(a)] = a;
  }
  management_ = cp.management_port();
  boot_id_ = cp.dpu_boot_id();
  if (!cp.host_instance().empty()) host_instance_ = cp.host_instance();
  seq_ = cp.host_seq();
}

Result<void> AttachmentBook::saveLocked() {
  checkpoint::v1::HostShimCheckpoint c;
  c.set_version(kCheckpointVersion);
  for (const auto& [k, a] : attachments_) *c.add_attachments() = a;
  for (const auto& [k, a] : returning_) *c.add_attachments() = a;
  *c.mutable_management_port() = management_;
  c.set_dpu_boot_id(boot_id_);
  c.set_host_instance(host_instance_);
  c.set_host_seq(seq_);
  return writer_(c);
}

std::optional<Attachment> AttachmentBook::find(const std::string& key) const {
  std::lock_guard lk(mu_);
  auto it = attachments_.find(key);
  if (it == attachments_.end()) return std::nullopt;
  return it->second;
}

std::vector<Attachment> AttachmentBook::attachments() const {
  std::lock_guard lk(mu_);
  std::vector<Attachment> out;
  for (const auto& [k, a] : attachments_) out.push_back(a);
  return out;
}

size_t AttachmentBook::size() const {
  std::lock_guard lk(mu_);
  return attachments_.size();
}

Result<uint64_t> AttachmentBook::record(const Attachment& a) {
  std::lock_guard lk(mu_);
  const std::string key = attachmentKey(a);
  std::optional<Attachment> before;
  if (auto it = attachments_.find(key); it != attachments_.end()) before = it->second;
  attachments_[key] = a;
  ++seq_;
  if (auto r = saveLocked(); !r) {
    --seq_;
    if (before)
      attachments_[key] = *before;
    else
      attachments_.erase(key);
    return std::move(r).takeError();
  }
  return seq_;
}

Result<uint64_t> AttachmentBook::nextSeq() {
  std::lock_guard lk(mu_);
  ++seq_;
  if (auto r = saveLocked(); !r) {
    --seq_;
    return std::move(r).takeError();
  }
  return seq_;
}

Result<void> AttachmentBook::put(const Attachment& a) { return putWithBootId(a, ""); }

Result<void> AttachmentBook::putWithBootId(const Attachment& a, const std::string& boot_id_if_unset) {
  std::lock_guard lk(mu_);
  const std::string key = attachmentKey(a);
  std::optional<Attachment> before;
  if (auto it = attachments_.find(key); it != attachments_.end()) before = it->second;
  const std::string boot_before = boot_id_;
  attachments_[key] = a;
  if (boot_id_.empty()) boot_id_ = boot_id_if_unset;
  if (auto r = saveLocked(); !r) {
    boot_id_ = boot_before;
    if (before)
      attachments_[key] = *before;
    else
      attachments_.erase(key);
    return r;
  }
  return {};
}

Result<void> AttachmentBook::erase(const std::string& key) {
  std::lock_guard lk(mu_);
  auto it = attachments_.find(key);
  if (it == attachments_.end()) return {};
  Attachment before = it->second;
  attachments_.erase(it);
  if (auto r = saveLocked(); !r) {
    attachments_[key] = before;
    return r;
  }
  return {};
}

Result<void> AttachmentBook::moveToReturning(const std::string& key, const Attachment& returning) {
  std::lock_guard lk(mu_);
  std::optional<Attachment> before;
  if (auto it = attachments_.find(key); it != attachments_.end()) before = it->second;
  const VfKey vf = vfKeyOf(returning);
  std::optional<Attachment> returning_before;
  if (auto it = returning_.find(vf); it != returning_.end()) returning_before = it->second;
  attachments_.erase(key);
  returning_[vf] = returning;
  if (auto r = saveLocked(); !r) {
    if (before) attachments_[key] = *before;
    if (returning_before)
      returning_[vf] = *returning_before;
    else
      returning_.erase(vf);
    return r;
  }
  return {};
}

std::optional<Attachment> AttachmentBook::returning(const VfKey& vf) const {
  std::lock_guard lk(mu_);
  auto it = returning_.find(vf);
  if (it == returning_.end()) return std::nullopt;
  return it->second;
}

std::vector<Attachment> AttachmentBook::returningAll() const {
  std::lock_guard lk(mu_);
  std::vector<Attachment> out;
  for (const auto& [k, a] : returning_) out.push_back(a);
  return out;
}

Result<void> AttachmentBook::setReturnProblem(const VfKey& vf, const std::string& problem) {
  std::lock_guard lk(mu_);
  auto it = returning_.find(vf);
  if (it == returning_.end()) return {};
  std::string before = it->second.return_problem();
  it->second.set_return_problem(problem);
  if (auto r = saveLocked(); !r) {
    it->second.set_return_problem(before);
    return r;
  }
  return {};
}

Result<void> AttachmentBook::returned(const VfKey& vf) {
  std::lock_guard lk(mu_);
  auto it = returning_.find(vf);
  if (it == returning_.end()) return {};
  Attachment before = it->second;
  returning_.erase(it);
  if (auto r = saveLocked(); !r) {
    returning_[vf] = before;
    return r;
  }
  return {};
}

attach::v1::Attachment AttachmentBook::management() const {
  std::lock_guard lk(mu_);
  return management_;
}

Result<void> AttachmentBook::setManagement(const attach::v1::Attachment& m) {
  std::lock_guard lk(mu_);
  attach::v1::Attachment before = management_;
  management_ = m;
  if (auto r = saveLocked(); !r) {
    management_ = before;
    return r;
  }
  return {};
}

std::string AttachmentBook::bootId() const {
  std::lock_guard lk(mu_);
  return boot_id_;
}

Result<void> AttachmentBook::setBootId(const std::string& boot_id) {
  std::lock_guard lk(mu_);
  std::string before = boot_id_;
  boot_id_ = boot_id;
  if (auto r = saveLocked(); !r) {
    boot_id_ = before;
    return r;
  }
  return {};
}

attach::v1::ReconcileRequest AttachmentBook::heldList() const {
  std::lock_guard lk(mu_);
  attach::v1::ReconcileRequest r;
  r.set_host_instance(host_instance_);
  r.set_as_of_seq(seq_);
  for (const auto& [k, a] : attachments_) {
    auto* h = r.add_held();
    h->set_network(a.network_name());
    h->set_sandbox_id(a.container_id());
    h->set_ifname(a.ifname());
    h->set_pf_index(a.pf_index());
    h->set_vf_index(a.vf_index());
  }
  return r;
}

}  // namespace dpu::hostshim
