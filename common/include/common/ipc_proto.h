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

// Fills `m`; the error's code says how the receive ended (recvFrame's codes,
// and kInvalid for bytes that are not the message).
inline Result<void> recvMessage(const Socket& s, google::protobuf::MessageLite& m, Deadline deadline,
                                size_t max_size = kDefaultMaxFrame) {
  auto payload = recvFrame(s, deadline, max_size);
  if (!payload) return std::move(payload).takeError();
  if (!m.ParseFromString(*payload))
    return Error{"malformed " + m.GetTypeName() + " (" + std::to_string(payload->size()) + " bytes)",
                 ErrorCode::kInvalid};
  return {};
}

// One request, one reply on a fresh connection.
template <typename Reply>
Result<Reply> call(const std::string& path, const google::protobuf::MessageLite& request, Deadline deadline,
                   size_t max_size = kDefaultMaxFrame) {
  auto sock = connectUnix(path, deadline);
  if (!sock) return std::move(sock).takeError();
  if (auto sent = sendMessage(*sock, request, deadline); !sent) return std::move(sent).takeError();
  Reply reply;
  auto got = recvMessage(*sock, reply, deadline, max_size);
  if (got.code() == ErrorCode::kClosed && !got.ok())
    return Error{path + " closed the connection without answering", ErrorCode::kClosed};
  if (!got) return prefixed(path, std::move(got).takeError());
  return reply;
}

}  // namespace dpu::ipc
