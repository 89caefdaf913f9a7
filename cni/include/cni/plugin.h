// The dpu-cni verbs: validate the invocation, forward it to host-shim as a
// CniRequest over its unix socket, and turn the answer into the spec's stdout
// and exit code. The transport is injectable so tests can stand in for
// host-shim without a socket.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "cni/invocation.h"
#include "common/ipc.h"
#include "common/result.h"
#include "dpu/cni/v1/cni.pb.h"

namespace dpu::cni {

struct Outcome {
  std::string stdout_text;
  int exit_code = 0;
};

// Sends one request to host-shim at `socket` and waits for its answer until the deadline.
using Transport = std::function<Result<dpu::cni::v1::CniResponse>(const std::string& socket,
                                                                   const dpu::cni::v1::CniRequest& request,
                                                                   ipc::Deadline deadline)>;
Transport unixSocketTransport();

// The request host-shim receives for a validated invocation.
dpu::cni::v1::CniRequest buildRequest(const Invocation& inv);

// Runs one invocation end to end. Logs go to stderr or the config's logFile.
Outcome run(const EnvLookup& env, std::string_view stdin_text, const Transport& transport);

}  // namespace dpu::cni
