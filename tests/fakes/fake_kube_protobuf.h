// Request bodies in Kubernetes' protobuf encoding, for the fake API server.
//
// client-go's typed clients, which kubectl's generator commands use
// (`kubectl create namespace`, `kubectl create service ...`), send
// Content-Type application/vnd.kubernetes.protobuf whatever the server's
// discovery says, and do not fall back to JSON on 415 (client-go does that
// only for CBOR). So the fake decodes what those commands send: the envelope
// ("k8s\0" then a runtime.Unknown {typeMeta, raw, contentEncoding,
// contentType}) and, in `raw`, the object in the field numbering of
// k8s.io/api's generated.proto, turned into the JSON the same client would
// have sent (zero values left out as Go's omitempty does, pointer fields kept
// when present).
//
// Decoded kinds: v1 Namespace, v1 Service, and meta/v1 DeleteOptions. Any
// other kind, a field number the schema here does not know, or a malformed
// encoding is an error naming the message and the field, never a partial
// object.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dpu::fakes {

// True when the Content-Type names Kubernetes' protobuf encoding.
bool isKubeProtobuf(std::string_view content_type);

// Decodes an enveloped object; the JSON carries apiVersion and kind from the
// envelope. kNotSupported: a kind this decoder does not know; kInvalid: bytes
// that are not a well-formed envelope or object.
Result<nlohmann::json> decodeKubeProtobuf(std::string_view body);

}  // namespace dpu::fakes
