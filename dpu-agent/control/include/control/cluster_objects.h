// The cluster's objects as both ClusterSources read them. A Service's spec
// and status and a NetworkPolicy's spec are read here, by one function each,
// from a FieldReader over either the Kubernetes object's part ("spec",
// "status") or the file's entry; an EndpointSlice and a pod's container ports,
// which the Kubernetes decoder reads as they stream in (they are most of a
// large cluster), are checked here by one function each after either source
// read them. So both sources give the same fields, the same defaults (the API
// server's, e.g. a port's protocol TCP, a ClientIP affinity's 10800 s, a
// NetworkPolicy's policyTypes) and the same refusals, with the field named as
// the input names it ("spec.ports[1].port",
// "cluster.yaml.services[0].ports[1].port").
//
// The input is untrusted (an API server, a hand-written file): what the real
// API server's validation refuses is refused here too, so a bad object is
// named and skipped whole, never half-applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config_doc.h"
#include "common/net_address.h"
#include "common/result.h"
#include "control/cluster_source.h"

namespace dpu::control {

// Labels with a meaning to the agent.
inline constexpr const char* kServiceNameLabel = "kubernetes.io/service-name";              // EndpointSlice → Service
inline constexpr const char* kServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name";
inline constexpr const char* kNamespaceNameLabel = "kubernetes.io/metadata.name";           // on every Namespace
// Kubernetes' DefaultClientIPServiceAffinitySeconds and its upper bound.
inline constexpr uint32_t kDefaultAffinityTimeoutSeconds = 10800;
inline constexpr uint32_t kMaxAffinityTimeoutSeconds = 86400;

// The API's spellings ("TCP", "ClusterIP", "Local", "IPv4", "NotIn", ...).
const char* protocolName(Protocol p);
std::optional<Protocol> protocolFromName(std::string_view name);
const char* serviceTypeName(ServiceType t);
const char* sessionAffinityName(SessionAffinity a);
const char* trafficPolicyName(TrafficPolicy p);
const char* addressTypeName(AddressType t);
const char* selectorOperatorName(SelectorOperator op);

// Why `name` is not a port name (IANA_SVC_NAME: 1-15 lower-case letters,
// digits and '-', at least one letter, no '-' at either end or twice in a
// row); empty when it is one.
std::string portNameProblem(std::string_view name);
// Why an address cannot be an endpoint's or an external IP ("" when it can):
// not an IP, or not a unicast address a client could be sent to (unspecified,
// loopback, link-local, multicast or broadcast), as the API server refuses.
std::string unicastProblem(std::string_view text, IpAddress* parsed = nullptr);
// Why a container port is not valid ("" when it is); checked by both sources.
std::string containerPortProblem(const ContainerPort& port);

// A problem with one field of an object: the field's path from the object
// ("endpoints[1].addresses[0]") and what is wrong with it.
struct FieldProblem {
  std::string field;
  std::string message;
  explicit operator bool() const { return !message.empty(); }
  std::string str() const { return field + ": " + message; }
};

std::optional<AddressType> addressTypeFromName(std::string_view name);
// The checks of an EndpointSlice both sources decode field by field: 1 to 100
// unicast addresses of the slice's addressType per endpoint (normalized
// here), port names that are RFC 1123 labels and unique.
FieldProblem validateEndpointSlice(EndpointSliceInfo& slice);

// Each reader takes its fields from `r`, applies the defaults, validates, and
// returns the first problem with the field's path (the reader's state holds
// it too). `strict`: fields it does not know inside the part are refused (the
// cluster file, where a typo must not pass); the Kubernetes source ignores
// them, as a client of a newer API server must. Top-level unknown fields are
// the caller's to check (r.finish()), since the caller reads metadata from
// the same entry in the file.
//
// A Service's spec: type, clusterIP(s)/headless, ports, externalIPs,
// sessionAffinity(+Config), internal/externalTrafficPolicy,
// publishNotReadyAddresses.
Result<void> readServiceSpec(FieldReader& spec, ServiceInfo& out, bool strict);
// A Service's status: loadBalancer.ingress[].ip.
Result<void> readServiceStatus(FieldReader& status, ServiceInfo& out, bool strict);
// An EndpointSlice's addressType (IPv4 when absent), endpoints and ports
// (the cluster file's reader; the Kubernetes decoder reads them as they stream
// in); then validateEndpointSlice.
Result<void> readEndpointSlice(FieldReader& r, EndpointSliceInfo& out, bool strict);
// A NetworkPolicy's spec: podSelector, policyTypes, ingress, egress.
Result<void> readNetworkPolicySpec(FieldReader& spec, NetworkPolicyInfo& out, bool strict);
// A pod's spec.containers[].ports[], appended to `out`.
Result<void> readContainerPorts(FieldReader& spec, std::vector<ContainerPort>& out, bool strict);
// Metadata labels (an object of strings); empty when absent.
Result<void> readLabels(FieldReader& r, std::map<std::string, std::string>& out);

// The JSON form of each object (the decode tool prints it; tests compare it):
// the API's field names and spellings, defaults applied.
nlohmann::json toJson(const NodeInfo& n);
nlohmann::json toJson(const PodInfo& p);
nlohmann::json toJson(const NamespaceInfo& n);
nlohmann::json toJson(const ServiceInfo& s);
nlohmann::json toJson(const EndpointSliceInfo& s);
nlohmann::json toJson(const NetworkPolicyInfo& p);
nlohmann::json toJson(const LabelSelector& s);

}  // namespace dpu::control
