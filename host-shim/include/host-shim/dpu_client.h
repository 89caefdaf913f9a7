// The host side of the attach API (proto/dpu/attach/v1/attach.proto): REST
// under /v1/ with protobuf bodies, over http or https (mTLS when a client
// certificate is configured). Every call has a short timeout so a DPU that is
// down turns into a prompt "unreachable" failure, never a hang; failures say
// whether the DPU was unreachable (retry later) or refused the request (fix it).
// Thread-safe: one client serves every CNI request concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "dpu/attach/v1/attach.pb.h"
#include "host-shim/config.h"

namespace dpu::hostshim {

struct DpuFailure {
  enum class Kind { kNone, kUnreachable, kRejected, kConflict };
  Kind kind = Kind::kNone;
  unsigned http_status = 0;  // 0 when no answer came
  std::string message;       // what failed, with the DPU's own message
  std::string holder;        // kConflict: the attachment holding the VF
};

template <typename T>
struct DpuResult {
  std::optional<T> value;
  DpuFailure failure;
  bool ok() const { return value.has_value(); }
};

class DpuClient {
 public:
  explicit DpuClient(const DpuConfig& config);
  ~DpuClient();
  DpuClient(const DpuClient&) = delete;
  DpuClient& operator=(const DpuClient&) = delete;

  DpuResult<attach::v1::AttachResponse> attach(const attach::v1::AttachRequest& r);
  DpuResult<attach::v1::DetachResponse> detach(const attach::v1::DetachRequest& r);
  DpuResult<attach::v1::AttachmentList> list();
  DpuResult<attach::v1::Health> health();

  const std::string& url() const { return url_; }

  struct Impl;  // cpprestsdk's client, kept out of this header

 private:
  std::string url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpu::hostshim
