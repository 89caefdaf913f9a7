// The framed IPC between dpu-agent and dpu-dataplane (common/ipc.h: a 4-byte
// big-endian length, then a protobuf), as the dataplane reads it: the input is
// the byte stream the peer sent, then closed. Frames are read until the stream
// ends or breaks; each is decoded as the dataplane decodes it (a ProgramRequest
// on the programming socket, an OperatorRequest on the operator socket). A lying
// length, a truncated frame or a malformed message must come back as an error.
// A StatusRequest is then taken as the dataplane takes it (model/ipsec_rotation.h):
// accepted, or refused with a reason.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "common/ipc_proto.h"
#include "model/ipsec_rotation.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

using namespace dpu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  ipc::Socket reader(fds[0]);
  ipc::Socket writer(fds[1]);
  // libFuzzer inputs are far below the socket buffer, so one write never blocks.
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::write(writer.fd(), data + sent, size - sent);
    if (n <= 0) std::abort();
    sent += static_cast<size_t>(n);
  }
  writer.close();
  // A small limit, so a length past it is refused as the product refuses 16 MiB.
  constexpr size_t kMax = 4096;
  for (int i = 0; i < 64; ++i) {
    Result<void> got;
    if (i % 2 == 0) {
      dataplane::v1::ProgramRequest req;
      got = ipc::recvMessage(reader, req, ipc::after(std::chrono::milliseconds(1000)), kMax);
      if (got.ok()) (void)req.ByteSizeLong();
      if (got.ok() && req.has_status()) {
        model::IpsecRotation rotation;
        auto taken = rotation.status(req.status(), 1);
        if (!taken.ok() && taken.error().empty()) std::abort();
        dataplane::v1::IpsecInfo info;
        rotation.describe(info, 2);
      }
    } else {
      dataplane::v1::OperatorRequest req;
      got = ipc::recvMessage(reader, req, ipc::after(std::chrono::milliseconds(1000)), kMax);
    }
    if (!got.ok()) {
      if (got.error().empty()) std::abort();  // every failure says why
      break;
    }
  }
  return 0;
}
