// Protobuf messages over the framed unix sockets of ipc.h. Header-only; the
// caller links protobuf (through dpu::proto).
#pragma once

#include <string>

#include <google/protobuf/message_lite.h>

#include "common/ipc.h"

namespace dpu::ipc {

inline Result<void> sendMessage(const Socket& s, const google::protobuf::MessageLite& m, Deadline deadline) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return Error{"cannot serialize " + m.GetTypeName()};
  return sendFrame(s, bytes, deadline);
}

// Fills `m`; the Frame reports how the receive ended (kClosed between frames is normal).
inline Frame recvMessage(const Socket& s, google::protobuf::MessageLite& m, Deadline deadline,
                         size_t max_size = kDefaultMaxFrame) {
  Frame f = recvFrame(s, deadline, max_size);
  if (!f.ok()) return f;
  if (!m.ParseFromString(f.payload)) {
    f.failure = RecvFailure::kError;
    f.error = "malformed " + m.GetTypeName() + " (" + std::to_string(f.payload.size()) + " bytes)";
  }
  f.payload.clear();
  return f;
}

// One request, one reply on a fresh connection.
template <typename Reply>
Result<Reply> call(const std::string& path, const google::protobuf::MessageLite& request, Deadline deadline,
                   size_t max_size = kDefaultMaxFrame) {
  auto sock = connectUnix(path, deadline);
  if (!sock) return std::move(sock).takeError();
  if (auto sent = sendMessage(*sock, request, deadline); !sent) return std::move(sent).takeError();
  Reply reply;
  Frame f = recvMessage(*sock, reply, deadline, max_size);
  if (f.failure == RecvFailure::kClosed) return Error{path + " closed the connection without answering"};
  if (!f.ok()) return Error{path + ": " + f.error};
  return reply;
}

}  // namespace dpu::ipc
