// Decoding of Kubernetes API objects into the ClusterSource structs. The API
// server's JSON is untrusted input: every field the agent uses is type-checked
// and its value validated (IP addresses, CIDRs, port ranges, protocols), and an
// object that fails is reported with its kind, namespace/name and the reason so
// the source can skip it, count it and log it — never half-apply it.
//
// Decoding is one streaming SAX pass (our own JSON reader, kube_objects.cpp,
// which bench/control.sh measured faster than nlohmann's SAX parser) that keeps only
// the fields the agent reads: a list page or a watch event is never held as a
// DOM, which is what lets 150,000 pods sync in a few seconds and little
// memory. What a Service, an EndpointSlice, a NetworkPolicy and a pod's
// container ports share with the cluster file is read or checked by
// cluster_objects.h, the same code the file source uses.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "control/cluster_source.h"

namespace dpu::control {

// "Node", "Pod", "Service", "EndpointSlice", "NetworkPolicy", "Namespace".
const char* kubeKindName(ObjectKind kind);
// "v1", "discovery.k8s.io/v1", "networking.k8s.io/v1".
const char* kubeApiVersion(ObjectKind kind);

// The annotations each DPU publishes on its host's Node.
inline constexpr const char* kTunnelIpAnnotation = "dpu-cni.io/tunnel-ip";
inline constexpr const char* kIpsecPublicKeyAnnotation = "dpu-cni.io/ipsec-public-key";
// The epoch of that key, a decimal number (1, 2, ...): it grows with every new key.
inline constexpr const char* kIpsecEpochAnnotation = "dpu-cni.io/ipsec-epoch";
// The IPsec mode the node runs, published with its key: "keys" or "on" (docs/ipsec.md, "Rollout").
inline constexpr const char* kIpsecModeAnnotation = "dpu-cni.io/ipsec-mode";
// Behind a NAT: the NAT's public IPv4 address, where peers send (docs/ipsec.md "NAT traversal").
inline constexpr const char* kIpsecNatAddressAnnotation = "dpu-cni.io/ipsec-nat-address";

// The ipsec-epoch annotation's value: 1..4294967295 in decimal, nothing else.
inline Result<uint32_t> parseIpsecEpochAnnotation(const std::string& text) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos ||
      (text.size() > 1 && text[0] == '0') || std::stoull(text) == 0 || std::stoull(text) > 0xffffffffull) {
    return Error{"must be a decimal number 1..4294967295 (the key's epoch), not \"" + text + "\"", ErrorCode::kInvalid};
  }
  return static_cast<uint32_t>(std::stoull(text));
}
// The node's logical port keys: a JSON object {"<pod address>": <key 1..32767>, ...}.
inline constexpr const char* kPortKeysAnnotation = "dpu-cni.io/port-keys";

// The port-keys annotation's value from the keys, and back (the error names
// the entry that is wrong).
std::string formatPortKeysAnnotation(const std::map<std::string, uint32_t>& keys);
Result<std::map<std::string, uint32_t>> parsePortKeysAnnotation(const std::string& text);

// One decoded object. `error` is empty when the object is usable; otherwise it
// says what is wrong and `info` must not be used (ns/name are still filled in as
// far as they could be read, for the log line).
struct KubeObject {
  ObjectKind kind = ObjectKind::kNode;
  std::string ns;
  std::string name;
  std::string resource_version;
  std::variant<NodeInfo, PodInfo, ServiceInfo, EndpointSliceInfo, NetworkPolicyInfo, NamespaceInfo> info;
  std::string error;

  bool ok() const { return error.empty(); }
  // "Pod default/web-1" — for log lines.
  std::string describe() const;
};

// A metav1.Status, as an error response body or the object of an ERROR event.
struct KubeStatus {
  int64_t code = 0;
  std::string reason;
  std::string message;
};

// Parses one object of `kind` (the JSON the API server returns for a GET).
// A malformed object is an Error naming the object and the reason.
Result<KubeObject> parseKubeObject(ObjectKind kind, std::string_view json);

// One page of a list response. Items are handed to `on_item` while the body is
// still being parsed; malformed items arrive with KubeObject::error set.
struct KubeListPage {
  std::string resource_version;
  std::string continue_token;
  uint64_t items = 0;
};
using KubeItemSink = std::function<void(KubeObject&&)>;
Result<KubeListPage> parseKubeList(ObjectKind kind, std::istream& body, const KubeItemSink& on_item);
Result<KubeListPage> parseKubeList(ObjectKind kind, std::string_view body, const KubeItemSink& on_item);

// One line of a watch stream.
struct KubeWatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  KubeObject object;   // for ADDED/MODIFIED/DELETED/BOOKMARK (BOOKMARK: resource_version only)
  KubeStatus status;   // for ERROR
};
// Error when the line is not a well-formed event (bad JSON, unknown type); an
// event whose object is malformed is ok() with object.error set.
Result<KubeWatchEvent> parseKubeWatchEvent(ObjectKind kind, std::string_view line);

// A Status body (non-2xx responses); code 0 when the body is not a Status.
KubeStatus parseKubeStatus(std::string_view body);

// One object of a Kubernetes YAML or JSON document stream, as `kubectl apply
// -f` takes it: decoded, or refused with its reason in object.error (kind,
// namespace and name filled in as far as they could be read).
struct KubeDocument {
  std::string where;   // "FILE document 2", "FILE document 1 items[3]"
  std::string kind;    // as the document says ("Service", "Deployment")
  KubeObject object;
};
// Decodes every Node, Pod, Service, Namespace (v1), EndpointSlice
// (discovery.k8s.io/v1) and NetworkPolicy (networking.k8s.io/v1) of a YAML
// stream (documents separated by ---) or JSON (one object or several in a
// row), the items of a List one by one, with the decoder the Kubernetes
// source uses; a namespaced object that names no namespace is in "default",
// as kubectl puts it. An Error only when the text is not YAML or JSON; an object
// of another kind or a malformed one is a KubeDocument with its error.
Result<std::vector<KubeDocument>> decodeKubeDocuments(std::string_view text, const std::string& origin);
// The JSON form of a decoded object (cluster_objects.h toJson, plus "kind").
nlohmann::json toJson(const KubeObject& object);

// A 64-bit fingerprint of what the agent sees of an object: equal fingerprints
// mean no listener needs to hear about it (a pod's status.conditions changing,
// for instance, does not reach the model).
uint64_t kubeFingerprint(const KubeObject& object);

}  // namespace dpu::control
