// The host side of the attach API (proto/dpu/attach/v1/attach.proto): DpuApi is
// what the rest of host-shim calls, DpuClient its REST implementation under
// /v1/ with protobuf bodies, over http or https (mTLS when a client
// certificate is configured). In-process tests use tests/fakes' FakeDpuApi.
//
// Every call has a short timeout (dpu.timeoutMs, the whole answer, body
// included) so a DPU that is down or hangs turns into a prompt failure, never a
// hang. Failures are Result errors whose ErrorCode says what
// the caller can do (cni_errors.h maps them to CNI codes):
//   kUnavailable  no answer (refused, timed out, TLS) or a 5xx: retry later
//   kExhausted    507: a capacity of the node is used up (pod addresses, ports): retry later
//   kConflict     409: held by another attachment, Error::holder names it
//   kInvalid      400 (and any other 4xx not below): the request is wrong, fix it
//   kForbidden    403, kNotFound 404, kTooLarge 413
// Thread-safe: one client serves every CNI request concurrently.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"
#include "host-shim/config.h"

namespace dpu::hostshim {

class DpuApi {
 public:
  virtual ~DpuApi() = default;
  virtual Result<attach::v1::AttachResponse> attach(const attach::v1::AttachRequest& r) = 0;
  virtual Result<attach::v1::DetachResponse> detach(const attach::v1::DetachRequest& r) = 0;
  virtual Result<attach::v1::AttachmentList> list() = 0;
  // One attachment with its dataplane_state (what CHECK asks); kNotFound when
  // the agent has none by that id.
  virtual Result<attach::v1::AttachResponse> get(const std::string& id) = 0;
  virtual Result<attach::v1::Health> health() = 0;
  virtual Result<attach::v1::ReconcileResponse> reconcile(const attach::v1::ReconcileRequest& r) = 0;
  // Where the agent is, for messages ("check that dpu-agent answers at ...").
  virtual const std::string& url() const = 0;
};

// The ErrorCode for an HTTP status the agent answered (see above).
ErrorCode errorCodeForHttpStatus(unsigned status);

class DpuClient final : public DpuApi {
 public:
  explicit DpuClient(const DpuConfig& config);
  ~DpuClient() override;
  DpuClient(const DpuClient&) = delete;
  DpuClient& operator=(const DpuClient&) = delete;

  Result<attach::v1::AttachResponse> attach(const attach::v1::AttachRequest& r) override;
  Result<attach::v1::DetachResponse> detach(const attach::v1::DetachRequest& r) override;
  Result<attach::v1::AttachmentList> list() override;
  Result<attach::v1::AttachResponse> get(const std::string& id) override;
  Result<attach::v1::Health> health() override;
  Result<attach::v1::ReconcileResponse> reconcile(const attach::v1::ReconcileRequest& r) override;

  const std::string& url() const override { return url_; }

  struct Impl;  // cpprestsdk's client, kept out of this header

 private:
  std::string url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpu::hostshim
