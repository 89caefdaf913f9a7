// The state of a fake DPU agent behind the attach API
// (proto/dpu/attach/v1/attach.proto), with the agent's rules: IPAM over a pod
// CIDR (gateway .1 and the management address .2 reserved, an address never
// handed out twice, next-fit), the MAC derived from the IP, a requested MAC
// refused (400) as the agent refuses it (the router's, zero, multicast, or in
// use: dpu-agent/model's rules), one attachment per
// VF and per (network, sandbox, ifname) with 409 naming the holder, the same
// answer for a retried attach, detach by exactly one selector, 507 when the
// CIDR is full, and the reconcile against host-shim's list (with the agent's
// rule for attaches older than the list). Two transports use it:
// fake_dpu_api (REST, for system tests and the lab) and FakeDpuApi
// (fake_dpu.h, in-process, for host-shim's unit tests). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"

namespace dpu::fakes {

struct FakeDpuOptions {
  std::string pod_cidr = "10.244.1.0/24";
  uint32_t vfs = 8;
  uint32_t mtu = 1400;
  std::string node_name = "node1";
  std::string cluster_cidr = "10.244.0.0/16";
  std::string service_cidr = "10.96.0.0/12";
};

class FakeDpuState {
 public:
  // Fails when the pod CIDR does not parse.
  static Result<std::unique_ptr<FakeDpuState>> create(FakeDpuOptions options);

  Result<attach::v1::AttachResponse> attach(const attach::v1::AttachRequest& r);
  Result<attach::v1::DetachResponse> detach(const attach::v1::DetachRequest& d);
  attach::v1::AttachmentList list() const;
  // One attachment (kNotFound when unknown), as GET /v1/attachments/{id}.
  Result<attach::v1::AttachResponse> get(const std::string& id) const;
  attach::v1::Health health() const;
  Result<attach::v1::ReconcileResponse> reconcile(const attach::v1::ReconcileRequest& r);

  // Test controls.
  // A DPU reboot: new boot id, every attachment forgotten, optionally a new pod CIDR.
  Result<void> reboot(const std::string& new_cidr = "");
  void setUnhealthy(bool on);
  // The next `count` attach calls fail with `e`.
  void failAttaches(int count, Error e);
  // The next attach answers this MTU (one the device may refuse).
  void answerMtuOnce(uint32_t mtu);
  // Attachment `id`'s dataplane_state (what CHECK reads); with an empty id,
  // every attachment's and that of the ones made from now on.
  void setDataplaneState(const std::string& id, const std::string& state);
  std::string bootId() const;

  // The HTTP status the agent answers for an ErrorCode (fake_dpu_api uses it).
  static unsigned httpStatusOf(ErrorCode code);
  static ErrorCode codeOfHttpStatus(unsigned status);

 private:
  explicit FakeDpuState(FakeDpuOptions options, IpPrefix cidr);
  std::optional<IpAddress> allocateLocked();
  void releaseLocked(std::map<std::string, attach::v1::Attachment>::iterator it);

  using Held = std::tuple<std::string, std::string, std::string, uint32_t, uint32_t>;  // network, sandbox, ifname, pf, vf

  FakeDpuOptions opt_;
  IpPrefix cidr_;
  mutable std::mutex mu_;
  std::string boot_id_;
  std::map<std::string, attach::v1::Attachment> attachments_;  // by id
  std::set<IpAddress> used_;
  uint64_t next_ = 0;
  bool unhealthy_ = false;
  int fail_count_ = 0;
  Error fail_error_;
  uint32_t answer_mtu_ = 0;
  std::string dataplane_state_ = "programmed";  // of new attachments
  // The last reconcile, for refusing attaches host-shim gave up on.
  std::string last_instance_;
  uint64_t last_as_of_ = 0;
  std::set<Held> last_held_;
};

}  // namespace dpu::fakes
