// The object parts both ClusterSources share (see cluster_objects.h). The
// rules follow the API server's defaulting (pkg/apis/core/v1/defaults.go,
// pkg/apis/networking/v1/defaults.go) and validation for the fields read.
#include "control/cluster_objects.h"

#include <algorithm>
#include <set>

namespace dpu::control {
namespace {

using nlohmann::json;

// Fields of the API that are valid in a part but that the agent does not use:
// accepted in the cluster file too, so an object copied from `kubectl get -o
// yaml` passes, while a misspelt field does not. Only the strict reader lists
// them (the lenient one ignores every unknown field anyway).
void ignoreKnown(FieldReader& r, std::initializer_list<std::string_view> keys) { r.ignore(keys); }

std::string shown(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

bool lowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 label: what a Service's and an EndpointSlice's port names are.
std::string dnsLabelProblem(std::string_view s) {
  if (s.empty() || s.size() > 63) return "must be 1-63 characters";
  for (char c : s)
    if (!lowerAlnum(c) && c != '-') return "must consist of lower-case letters, digits and '-'";
  if (s.front() == '-' || s.back() == '-') return "must start and end with a letter or digit";
  return {};
}

Protocol readProtocol(FieldReader& r) {
  std::string name = r.str("protocol", "TCP");
  auto p = protocolFromName(name);
  if (!p) {
    if (r.ok()) r.fail("protocol", "must be TCP, UDP or SCTP, not \"" + name + "\"");
    return Protocol::kTcp;
  }
  return *p;
}

// A port number: 1..65535; absent is 0 unless required.
uint16_t readPortNumber(FieldReader& r, std::string_view key, bool required) {
  if (!required && !r.has(key)) {
    r.raw(key);  // known, absent
    return 0;
  }
  return static_cast<uint16_t>(r.uint(key, 1, 65535, required ? std::nullopt : std::optional<uint64_t>(0)));
}

// IntOrString where it names a port: a number 1..65535 or an IANA service name.
PortRef readPortRef(FieldReader& r, std::string_view key) {
  PortRef out;
  const json* v = r.raw(key);
  if (v == nullptr) return out;
  if (v->is_number_integer()) {
    int64_t n = v->is_number_unsigned() && v->get<uint64_t>() > 65535 ? 65536 : v->get<int64_t>();
    if (n < 1 || n > 65535) r.fail(key, "must be a port number between 1 and 65535 or a port name, not " + shown(*v));
    else out.number = static_cast<uint16_t>(n);
  } else if (v->is_string()) {
    std::string name = v->get<std::string>();
    if (auto p = portNameProblem(name); !p.empty()) {
      bool digits = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
      r.fail(key, "\"" + name + "\" is not a port name: " + p +
                      (digits ? " (a port number is written without quotes)" : ""));
    } else {
      out.name = std::move(name);
    }
  } else {
    r.fail(key, "must be a port number or a port name, not " + shown(*v));
  }
  return out;
}

// A list of unicast addresses a client may be sent to, each normalized.
std::vector<std::string> readAddresses(FieldReader& r, std::string_view key) {
  std::vector<std::string> out;
  std::vector<std::string> texts = r.strings(key);
  for (size_t i = 0; i < texts.size() && r.ok(); ++i) {
    IpAddress ip;
    if (auto p = unicastProblem(texts[i], &ip); !p.empty()) {
      r.fail(std::string(key) + "[" + std::to_string(i) + "]", p);
      break;
    }
    out.push_back(ip.str());
  }
  return out;
}

// An object of strings (labels, matchLabels).
void readStringMap(FieldReader& r, std::string_view key, std::map<std::string, std::string>& out) {
  const json* v = r.raw(key);
  if (v == nullptr) return;
  if (!v->is_object()) {
    r.fail(key, "must be an object of strings, not " + shown(*v));
    return;
  }
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) {
      r.fail(std::string(key) + "." + k, "must be a string, not " + shown(val));
      return;
    }
    out[k] = val.get<std::string>();
  }
}

std::optional<LabelSelector> readSelector(FieldReader& parent, std::string_view key, bool strict) {
  if (!parent.has(key)) {
    parent.raw(key);
    return std::nullopt;
  }
  FieldReader r = parent.object(key);
  LabelSelector sel;
  readStringMap(r, "matchLabels", sel.match_labels);
  auto exprs = r.objects("matchExpressions");
  for (size_t i = 0; i < exprs.size() && r.ok(); ++i) {
    FieldReader& e = exprs[i];
    SelectorRequirement req;
    req.key = e.str("key");
    if (e.ok() && req.key.empty()) e.fail("key", "must not be empty");
    std::string op = e.str("operator");
    if (op == "In") req.op = SelectorOperator::kIn;
    else if (op == "NotIn") req.op = SelectorOperator::kNotIn;
    else if (op == "Exists") req.op = SelectorOperator::kExists;
    else if (op == "DoesNotExist") req.op = SelectorOperator::kDoesNotExist;
    else if (e.ok()) e.fail("operator", "must be In, NotIn, Exists or DoesNotExist, not \"" + op + "\"");
    req.values = e.strings("values");
    if (e.ok()) {
      bool sets = req.op == SelectorOperator::kIn || req.op == SelectorOperator::kNotIn;
      if (sets && req.values.empty()) e.fail("values", std::string("must hold at least one value for operator ") + op);
      if (!sets && !req.values.empty()) e.fail("values", std::string("must be empty for operator ") + op);
    }
    e.close(!strict);
    sel.match_expressions.push_back(std::move(req));
  }
  r.close(!strict);
  return sel;
}

std::optional<IpBlock> readIpBlock(FieldReader& peer, bool strict) {
  if (!peer.has("ipBlock")) {
    peer.raw("ipBlock");
    return std::nullopt;
  }
  FieldReader r = peer.object("ipBlock");
  IpBlock block;
  std::string text = r.str("cidr");
  auto cidr = IpPrefix::parse(text, true);
  if (r.ok() && !cidr) r.fail("cidr", "'" + text + "' is not a CIDR");
  if (cidr) block.cidr = cidr->str();
  auto excepts = r.strings("except");
  for (size_t i = 0; i < excepts.size() && r.ok() && cidr; ++i) {
    std::string where = "except[" + std::to_string(i) + "]";
    auto ex = IpPrefix::parse(excepts[i], true);
    if (!ex) {
      r.fail(where, "'" + excepts[i] + "' is not a CIDR");
    } else if (ex->address.family != cidr->address.family || !cidr->contains(ex->address) ||
               ex->length <= cidr->length) {
      r.fail(where, "'" + excepts[i] + "' is not a strict subset of cidr " + cidr->str());
    } else {
      block.except.push_back(ex->str());
    }
  }
  r.close(!strict);
  return block;
}

std::vector<NetworkPolicyPeer> readPeers(FieldReader& rule, std::string_view key, bool strict) {
  std::vector<NetworkPolicyPeer> out;
  auto peers = rule.objects(key);
  for (size_t i = 0; i < peers.size() && rule.ok(); ++i) {
    FieldReader& p = peers[i];
    NetworkPolicyPeer peer;
    peer.pod_selector = readSelector(p, "podSelector", strict);
    peer.namespace_selector = readSelector(p, "namespaceSelector", strict);
    peer.ip_block = readIpBlock(p, strict);
    std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    if (p.ok() && peer.ip_block && (peer.pod_selector || peer.namespace_selector))
      rule.fail(where, "ipBlock may not be combined with podSelector or namespaceSelector in one peer");
    if (p.ok() && !peer.ip_block && !peer.pod_selector && !peer.namespace_selector)
      rule.fail(where, "must give podSelector, namespaceSelector or ipBlock");
    p.close(!strict);
    out.push_back(std::move(peer));
  }
  return out;
}

std::vector<NetworkPolicyPort> readPolicyPorts(FieldReader& rule, bool strict) {
  std::vector<NetworkPolicyPort> out;
  auto ports = rule.objects("ports");
  for (size_t i = 0; i < ports.size() && rule.ok(); ++i) {
    FieldReader& r = ports[i];
    NetworkPolicyPort port;
    port.protocol = readProtocol(r);
    port.port = readPortRef(r, "port");
    if (r.has("endPort")) {
      port.end_port = static_cast<uint16_t>(r.uint("endPort", 1, 65535, 0));
      if (!r.ok()) {
      } else if (port.port.isName()) {
        r.fail("endPort", "cannot follow a named port (\"" + port.port.name + "\"): a range needs a port number");
      } else if (port.port.empty()) {
        r.fail("endPort", "needs port, the first port of the range");
      } else if (port.end_port < port.port.number) {
        r.fail("endPort", std::to_string(port.end_port) + " is below port " + std::to_string(port.port.number));
      }
    } else {
      r.raw("endPort");
    }
    r.close(!strict);
    out.push_back(std::move(port));
  }
  return out;
}

std::vector<NetworkPolicyRule> readRules(FieldReader& spec, std::string_view key, std::string_view peers, bool strict) {
  std::vector<NetworkPolicyRule> out;
  auto rules = spec.objects(key);
  for (size_t i = 0; i < rules.size() && spec.ok(); ++i) {
    NetworkPolicyRule rule;
    rule.peers = readPeers(rules[i], peers, strict);
    rule.ports = readPolicyPorts(rules[i], strict);
    rules[i].close(!strict);
    out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::kTcp: return "TCP";
    case Protocol::kUdp: return "UDP";
    case Protocol::kSctp: return "SCTP";
  }
  return "TCP";
}

std::optional<Protocol> protocolFromName(std::string_view name) {
  if (name == "TCP") return Protocol::kTcp;
  if (name == "UDP") return Protocol::kUdp;
  if (name == "SCTP") return Protocol::kSctp;
  return std::nullopt;
}

const char* serviceTypeName(ServiceType t) {
  switch (t) {
    case ServiceType::kClusterIP: return "ClusterIP";
    case ServiceType::kNodePort: return "NodePort";
    case ServiceType::kLoadBalancer: return "LoadBalancer";
    case ServiceType::kExternalName: return "ExternalName";
  }
  return "ClusterIP";
}

const char* sessionAffinityName(SessionAffinity a) { return a == SessionAffinity::kClientIP ? "ClientIP" : "None"; }
const char* trafficPolicyName(TrafficPolicy p) { return p == TrafficPolicy::kLocal ? "Local" : "Cluster"; }

const char* addressTypeName(AddressType t) {
  switch (t) {
    case AddressType::kIPv4: return "IPv4";
    case AddressType::kIPv6: return "IPv6";
    case AddressType::kFQDN: return "FQDN";
  }
  return "IPv4";
}

const char* selectorOperatorName(SelectorOperator op) {
  switch (op) {
    case SelectorOperator::kIn: return "In";
    case SelectorOperator::kNotIn: return "NotIn";
    case SelectorOperator::kExists: return "Exists";
    case SelectorOperator::kDoesNotExist: return "DoesNotExist";
  }
  return "In";
}

std::string portNameProblem(std::string_view s) {
  if (s.empty() || s.size() > 15) return "must be 1-15 characters";
  bool letter = false;
  for (char c : s) {
    if (!lowerAlnum(c) && c != '-') return "must consist of lower-case letters, digits and '-'";
    letter |= c >= 'a' && c <= 'z';
  }
  if (!letter) return "must contain at least one letter";
  if (s.front() == '-' || s.back() == '-') return "must not start or end with '-'";
  if (s.find("--") != std::string_view::npos) return "must not contain '--'";
  return {};
}

std::string unicastProblem(std::string_view text, IpAddress* parsed) {
  auto ip = IpAddress::parse(text);
  if (!ip) return "'" + std::string(text) + "' is not an IP address";
  const auto& b = ip->bytes;
  const char* what = nullptr;
  if (ip->isV4()) {
    uint32_t a = ip->v4HostOrder();
    if (a == 0) what = "the unspecified address";
    else if ((a >> 24) == 127) what = "a loopback address";
    else if ((a >> 16) == 0xa9fe) what = "a link-local address";
    else if ((a >> 28) == 0xe) what = "a multicast address";
    else if (a == 0xffffffffu) what = "the broadcast address";
  } else {
    bool zero = std::all_of(b.begin(), b.begin() + 15, [](uint8_t x) { return x == 0; });
    if (zero && b[15] == 0) what = "the unspecified address";
    else if (zero && b[15] == 1) what = "a loopback address";
    else if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) what = "a link-local address";
    else if (b[0] == 0xff) what = "a multicast address";
  }
  if (what != nullptr) return "'" + std::string(text) + "' is " + what + ", not a unicast address";
  if (parsed != nullptr) *parsed = *ip;
  return {};
}

std::string containerPortProblem(const ContainerPort& p) {
  if (p.port == 0) return "containerPort must be between 1 and 65535";
  if (!p.name.empty())
    if (auto why = portNameProblem(p.name); !why.empty()) return "name \"" + p.name + "\" is not a port name: " + why;
  return {};
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& req : match_expressions) {
    auto it = labels.find(req.key);
    bool has = it != labels.end();
    bool listed = has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    switch (req.op) {
      case SelectorOperator::kIn:
        if (!listed) return false;
        break;
      case SelectorOperator::kNotIn:  // an object without the label is not in the set
        if (listed) return false;
        break;
      case SelectorOperator::kExists:
        if (!has) return false;
        break;
      case SelectorOperator::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

Result<void> readLabels(FieldReader& r, std::map<std::string, std::string>& out) {
  readStringMap(r, "labels", out);
  return r.finish(true);
}

Result<void> readServiceSpec(FieldReader& spec, ServiceInfo& s, bool strict) {
  std::string type = spec.str("type", "ClusterIP");
  if (type == "ClusterIP") s.type = ServiceType::kClusterIP;
  else if (type == "NodePort") s.type = ServiceType::kNodePort;
  else if (type == "LoadBalancer") s.type = ServiceType::kLoadBalancer;
  else if (type == "ExternalName") s.type = ServiceType::kExternalName;
  else if (spec.ok()) spec.fail("type", "must be ClusterIP, NodePort, LoadBalancer or ExternalName, not \"" + type + "\"");
  const bool external_type = s.type == ServiceType::kNodePort || s.type == ServiceType::kLoadBalancer;

  // clusterIP and clusterIPs: the latter wins and must start with the former.
  std::string one = spec.str("clusterIP", "");
  std::vector<std::string> ips = spec.strings("clusterIPs");
  if (spec.ok() && !one.empty() && !ips.empty() && ips[0] != one)
    spec.fail("clusterIPs", "the first entry must be clusterIP (" + one + "), not " + ips[0]);
  if (ips.empty() && !one.empty()) ips.push_back(one);
  s.cluster_ips.clear();
  s.headless = false;
  if (!ips.empty() && ips[0] == "None") {
    s.headless = true;
    if (spec.ok() && ips.size() > 1) spec.fail("clusterIPs", "\"None\" (headless) must be the only entry");
    if (spec.ok() && external_type)
      spec.fail("clusterIP", std::string("\"None\" (headless) is not allowed for type ") + type);
  } else {
    std::set<IpAddress::Family> families;
    for (size_t i = 0; i < ips.size() && spec.ok(); ++i) {
      auto ip = IpAddress::parse(ips[i]);
      if (!ip) {
        spec.fail("clusterIPs[" + std::to_string(i) + "]", "'" + ips[i] + "' is not an IP address");
      } else if (!families.insert(ip->family).second || i > 1) {
        spec.fail("clusterIPs", "at most one address per family (dual stack), not " + std::to_string(ips.size()));
      } else {
        s.cluster_ips.push_back(ip->str());
      }
    }
  }
  if (spec.ok() && s.type == ServiceType::kExternalName && (s.headless || !s.cluster_ips.empty()))
    spec.fail("clusterIP", "an ExternalName service has no cluster IP");

  // ipFamilyPolicy and ipFamilies, checked as the API server does: families
  // named once each, one for SingleStack, in the cluster IPs' order. Absent,
  // the policy is RequireDualStack where two families or two cluster IPs are
  // given, else SingleStack (the API server's defaulting).
  s.ip_families = spec.strings("ipFamilies");
  const char* policy_default = s.type == ServiceType::kExternalName                      ? ""
                               : s.cluster_ips.size() == 2 || s.ip_families.size() == 2 ? "RequireDualStack"
                                                                                        : "SingleStack";
  s.ip_family_policy = spec.str("ipFamilyPolicy", policy_default);
  if (spec.ok() && !s.ip_family_policy.empty() && s.ip_family_policy != "SingleStack" &&
      s.ip_family_policy != "PreferDualStack" && s.ip_family_policy != "RequireDualStack") {
    spec.fail("ipFamilyPolicy", "must be SingleStack, PreferDualStack or RequireDualStack, not \"" +
                                    s.ip_family_policy + "\"");
  }
  for (size_t i = 0; i < s.ip_families.size() && spec.ok(); ++i) {
    const std::string& f = s.ip_families[i];
    const std::string where = "ipFamilies[" + std::to_string(i) + "]";
    if (f != "IPv4" && f != "IPv6") spec.fail(where, "must be IPv4 or IPv6, not \"" + f + "\"");
    else if (i == 1 && f == s.ip_families[0]) spec.fail(where, f + " is listed twice");
    else if (i > 1) spec.fail("ipFamilies", "at most two families (dual stack), not " + std::to_string(s.ip_families.size()));
  }
  if (spec.ok() && s.ip_family_policy == "SingleStack" && s.ip_families.size() > 1)
    spec.fail("ipFamilies", "SingleStack takes one family, not " + std::to_string(s.ip_families.size()));
  if (spec.ok() && s.ip_family_policy == "SingleStack" && s.cluster_ips.size() > 1)
    spec.fail("clusterIPs", "SingleStack takes one cluster IP, not " + std::to_string(s.cluster_ips.size()));
  if (spec.ok() && s.type == ServiceType::kExternalName && !s.ip_families.empty())
    spec.fail("ipFamilies", "an ExternalName service has no IP families");
  for (size_t i = 0; i < s.cluster_ips.size() && spec.ok(); ++i) {
    const std::string family = s.cluster_ips[i].find(':') == std::string::npos ? "IPv4" : "IPv6";
    if (i < s.ip_families.size()) {
      if (s.ip_families[i] != family)
        spec.fail("ipFamilies[" + std::to_string(i) + "]", "is " + s.ip_families[i] + " but clusterIPs[" +
                                                              std::to_string(i) + "] " + s.cluster_ips[i] + " is " + family);
    } else {
      s.ip_families.push_back(family);
    }
  }

  auto ports = spec.objects("ports");
  s.ports.clear();
  for (size_t i = 0; i < ports.size() && spec.ok(); ++i) {
    FieldReader& r = ports[i];
    ServicePort p;
    p.name = r.str("name", "");
    if (r.ok() && !p.name.empty())
      if (auto why = dnsLabelProblem(p.name); !why.empty()) r.fail("name", "\"" + p.name + "\" " + why);
    p.protocol = readProtocol(r);
    p.port = readPortNumber(r, "port", true);
    p.target_port = readPortRef(r, "targetPort");
    if (p.target_port.empty()) p.target_port.number = p.port;
    p.node_port = readPortNumber(r, "nodePort", false);
    if (r.ok() && p.node_port != 0 && !external_type)
      r.fail("nodePort", std::string("is only for type NodePort or LoadBalancer, not ") + type);
    if (strict) ignoreKnown(r, {"appProtocol"});
    r.close(!strict);
    std::string where = "ports[" + std::to_string(i) + "]";
    for (size_t j = 0; j < s.ports.size(); ++j) {
      const ServicePort& o = s.ports[j];
      if (o.port == p.port && o.protocol == p.protocol) {
        spec.fail(where, "port " + std::to_string(p.port) + "/" + protocolName(p.protocol) +
                             " is listed twice (also ports[" + std::to_string(j) + "])");
      } else if (!p.name.empty() && o.name == p.name) {
        spec.fail(where + ".name", "\"" + p.name + "\" is used twice (also ports[" + std::to_string(j) + "])");
      }
    }
    s.ports.push_back(std::move(p));
  }
  if (spec.ok() && s.ports.size() > 1) {
    for (size_t i = 0; i < s.ports.size() && spec.ok(); ++i)
      if (s.ports[i].name.empty())
        spec.fail("ports[" + std::to_string(i) + "].name", "is required when a service has more than one port");
  }
  if (spec.ok() && s.ports.empty() && !s.headless && s.type != ServiceType::kExternalName)
    spec.fail("ports", "is required: a service with a cluster IP needs at least one port");

  s.external_ips = readAddresses(spec, "externalIPs");

  std::string affinity = spec.str("sessionAffinity", "None");
  if (affinity == "ClientIP") s.session_affinity = SessionAffinity::kClientIP;
  else if (affinity == "None") s.session_affinity = SessionAffinity::kNone;
  else if (spec.ok()) spec.fail("sessionAffinity", "must be None or ClientIP, not \"" + affinity + "\"");
  s.affinity_timeout_seconds = 0;
  if (spec.has("sessionAffinityConfig")) {
    FieldReader cfg = spec.object("sessionAffinityConfig");
    FieldReader client = cfg.object("clientIP", true);
    bool given = client.has("timeoutSeconds");
    auto timeout = static_cast<uint32_t>(
        client.uint("timeoutSeconds", 1, kMaxAffinityTimeoutSeconds, kDefaultAffinityTimeoutSeconds));
    if (client.ok() && given && s.session_affinity != SessionAffinity::kClientIP)
      spec.fail("sessionAffinityConfig", "is only for sessionAffinity ClientIP");
    if (s.session_affinity == SessionAffinity::kClientIP) s.affinity_timeout_seconds = timeout;
    client.close(!strict);
    cfg.close(!strict);
  } else {
    spec.raw("sessionAffinityConfig");
    if (s.session_affinity == SessionAffinity::kClientIP) s.affinity_timeout_seconds = kDefaultAffinityTimeoutSeconds;
  }

  for (auto [key, out] : {std::pair{"internalTrafficPolicy", &s.internal_traffic_policy},
                          std::pair{"externalTrafficPolicy", &s.external_traffic_policy}}) {
    std::string v = spec.str(key, "Cluster");
    if (v == "Cluster") *out = TrafficPolicy::kCluster;
    else if (v == "Local") *out = TrafficPolicy::kLocal;
    else if (spec.ok()) spec.fail(key, "must be Cluster or Local, not \"" + v + "\"");
  }
  s.publish_not_ready_addresses = spec.boolean("publishNotReadyAddresses", false);
  if (strict) ignoreKnown(spec, {"selector", "externalName", "loadBalancerIP",
                     "loadBalancerSourceRanges", "loadBalancerClass", "allocateLoadBalancerNodePorts",
                     "healthCheckNodePort", "trafficDistribution"});
  return spec.finish(true);
}

Result<void> readServiceStatus(FieldReader& status, ServiceInfo& s, bool strict) {
  s.load_balancer_ips.clear();
  FieldReader lb = status.object("loadBalancer", true);
  auto ingress = lb.objects("ingress");
  for (size_t i = 0; i < ingress.size() && status.ok(); ++i) {
    FieldReader& r = ingress[i];
    std::string ip = r.str("ip", "");
    if (r.ok() && !ip.empty()) {
      IpAddress parsed;
      if (auto why = unicastProblem(ip, &parsed); !why.empty()) r.fail("ip", why);
      else s.load_balancer_ips.push_back(parsed.str());
    }
    if (strict) ignoreKnown(r, {"hostname", "ipMode", "ports"});
    r.close(!strict);
  }
  lb.close(!strict);
  if (strict) ignoreKnown(status, {"conditions"});
  return status.finish(true);
}

std::optional<AddressType> addressTypeFromName(std::string_view name) {
  if (name == "IPv4") return AddressType::kIPv4;
  if (name == "IPv6") return AddressType::kIPv6;
  if (name == "FQDN") return AddressType::kFQDN;
  return std::nullopt;
}

FieldProblem validateEndpointSlice(EndpointSliceInfo& s) {
  // Paths are spelt out only for a problem: this runs for every endpoint of a sync.
  auto at = [](size_t i) { return "endpoints[" + std::to_string(i) + "]"; };
  for (size_t i = 0; i < s.endpoints.size(); ++i) {
    auto& addresses = s.endpoints[i].addresses;
    if (addresses.empty() || addresses.size() > 100)
      return {at(i) + ".addresses", "must hold 1 to 100 addresses, not " + std::to_string(addresses.size())};
    if (s.address_type == AddressType::kFQDN) continue;
    for (size_t k = 0; k < addresses.size(); ++k) {
      IpAddress ip;
      auto where = [&] { return at(i) + ".addresses[" + std::to_string(k) + "]"; };
      if (auto why = unicastProblem(addresses[k], &ip); !why.empty()) return {where(), why};
      if (ip.isV4() != (s.address_type == AddressType::kIPv4))
        return {where(), "'" + addresses[k] + "' is not of addressType " + addressTypeName(s.address_type)};
      // IPv4 text inet_pton accepts is already canonical (no leading zeros);
      // IPv6 has several spellings of one address.
      if (!ip.isV4()) addresses[k] = ip.str();
    }
  }
  for (size_t i = 0; i < s.ports.size(); ++i) {
    const auto& port = s.ports[i];
    auto where = [&] { return "ports[" + std::to_string(i) + "].name"; };
    if (!port.name.empty())
      if (auto why = dnsLabelProblem(port.name); !why.empty()) return {where(), "\"" + port.name + "\" " + why};
    for (size_t j = 0; j < i; ++j)
      if (s.ports[j].name == port.name)
        return {where(), "\"" + port.name + "\" is used twice (also ports[" + std::to_string(j) + "])"};
  }
  return {};
}

Result<void> readEndpointSlice(FieldReader& r, EndpointSliceInfo& s, bool strict) {
  std::string type = r.str("addressType", "IPv4");
  if (auto t = addressTypeFromName(type)) s.address_type = *t;
  else if (r.ok()) r.fail("addressType", "must be IPv4, IPv6 or FQDN, not \"" + type + "\"");

  s.endpoints.clear();
  auto endpoints = r.objects("endpoints");
  for (size_t i = 0; i < endpoints.size() && r.ok(); ++i) {
    FieldReader& e = endpoints[i];
    EndpointInfo ep;
    ep.addresses = e.strings("addresses", true);
    FieldReader cond = e.object("conditions", true);
    ep.ready = cond.boolean("ready", true);
    ep.serving = cond.boolean("serving", true);
    ep.terminating = cond.boolean("terminating", false);
    cond.close(!strict);
    ep.node_name = e.str("nodeName", "");
    FieldReader ref = e.object("targetRef", true);
    ep.target_ref.kind = ref.str("kind", "");
    ep.target_ref.ns = ref.str("namespace", "");
    ep.target_ref.name = ref.str("name", "");
    if (strict) ignoreKnown(ref, {"uid", "apiVersion", "resourceVersion", "fieldPath"});
    ref.close(!strict);
    if (strict) ignoreKnown(e, {"hostname", "zone", "hints", "deprecatedTopology"});
    e.close(!strict);
    s.endpoints.push_back(std::move(ep));
  }

  s.ports.clear();
  auto ports = r.objects("ports");
  for (size_t i = 0; i < ports.size() && r.ok(); ++i) {
    FieldReader& p = ports[i];
    EndpointSliceInfo::Port port;
    port.name = p.str("name", "");
    port.protocol = readProtocol(p);
    port.port = readPortNumber(p, "port", false);
    if (strict) ignoreKnown(p, {"appProtocol"});
    p.close(!strict);
    s.ports.push_back(std::move(port));
  }
  if (r.ok())
    if (auto problem = validateEndpointSlice(s)) r.fail(problem.field, problem.message);
  return r.finish(true);
}

Result<void> readNetworkPolicySpec(FieldReader& spec, NetworkPolicyInfo& p, bool strict) {
  auto selector = readSelector(spec, "podSelector", strict);
  p.pod_selector = selector.value_or(LabelSelector{});
  std::vector<std::string> types = spec.strings("policyTypes");
  p.ingress = readRules(spec, "ingress", "from", strict);
  p.egress = readRules(spec, "egress", "to", strict);
  if (types.empty()) {
    // The API server's defaulting: a policy without policyTypes isolates
    // ingress, and egress too when it has egress rules.
    p.policy_ingress = true;
    p.policy_egress = !p.egress.empty();
  } else {
    p.policy_ingress = p.policy_egress = false;
    for (size_t i = 0; i < types.size() && spec.ok(); ++i) {
      if (types[i] == "Ingress") p.policy_ingress = true;
      else if (types[i] == "Egress") p.policy_egress = true;
      else spec.fail("policyTypes[" + std::to_string(i) + "]", "must be Ingress or Egress, not \"" + types[i] + "\"");
    }
  }
  return spec.finish(true);
}

Result<void> readContainerPorts(FieldReader& spec, std::vector<ContainerPort>& out, bool strict) {
  auto containers = spec.objects("containers");
  for (size_t c = 0; c < containers.size() && spec.ok(); ++c) {
    FieldReader& container = containers[c];
    container.str("name", "");
    auto ports = container.objects("ports");
    for (size_t i = 0; i < ports.size() && spec.ok(); ++i) {
      FieldReader& r = ports[i];
      ContainerPort port;
      port.name = r.str("name", "");
      port.port = static_cast<uint16_t>(r.uint("containerPort", 1, 65535));
      port.protocol = readProtocol(r);
      if (r.ok())
        if (auto why = containerPortProblem(port); !why.empty()) r.fail("name", why);
      if (strict) ignoreKnown(r, {"hostPort", "hostIP"});
      r.close(!strict);
      out.push_back(std::move(port));
    }
    if (strict) ignoreKnown(container, {"image"});
    container.close(!strict);
  }
  return spec.finish(true);
}

json toJson(const LabelSelector& s) {
  json out = json::object();
  if (!s.match_labels.empty()) out["matchLabels"] = s.match_labels;
  if (!s.match_expressions.empty()) {
    json exprs = json::array();
    for (const auto& r : s.match_expressions)
      exprs.push_back({{"key", r.key}, {"operator", selectorOperatorName(r.op)}, {"values", r.values}});
    out["matchExpressions"] = exprs;
  }
  return out;
}

namespace {

json portRefJson(const PortRef& p) {
  if (p.isName()) return p.name;
  if (p.number != 0) return p.number;
  return nullptr;
}

json rulesJson(const std::vector<NetworkPolicyRule>& rules, const char* peers_key) {
  json out = json::array();
  for (const auto& rule : rules) {
    json peers = json::array();
    for (const auto& peer : rule.peers) {
      json j = json::object();
      if (peer.pod_selector) j["podSelector"] = toJson(*peer.pod_selector);
      if (peer.namespace_selector) j["namespaceSelector"] = toJson(*peer.namespace_selector);
      if (peer.ip_block) j["ipBlock"] = {{"cidr", peer.ip_block->cidr}, {"except", peer.ip_block->except}};
      peers.push_back(j);
    }
    json ports = json::array();
    for (const auto& port : rule.ports) {
      json j = {{"protocol", protocolName(port.protocol)}};
      if (!port.port.empty()) j["port"] = portRefJson(port.port);
      if (port.end_port != 0) j["endPort"] = port.end_port;
      ports.push_back(j);
    }
    out.push_back({{peers_key, peers}, {"ports", ports}});
  }
  return out;
}

}  // namespace

json toJson(const NodeInfo& n) {
  return {{"name", n.name},           {"tunnelIP", n.tunnel_ip}, {"podCIDRs", n.pod_cidrs},
          {"ipsecPublicKey", n.ipsec_public_key}, {"labels", n.labels}, {"portKeys", n.port_keys}};
}

json toJson(const PodInfo& p) {
  json ports = json::array();
  for (const auto& c : p.ports)
    ports.push_back({{"name", c.name}, {"containerPort", c.port}, {"protocol", protocolName(c.protocol)}});
  return {{"namespace", p.ns}, {"name", p.name},   {"uid", p.uid},       {"nodeName", p.node_name},
          {"ips", p.ips},      {"labels", p.labels}, {"hostNetwork", p.host_network}, {"ports", ports}};
}

json toJson(const NamespaceInfo& n) { return {{"name", n.name}, {"labels", n.labels}}; }

json toJson(const ServiceInfo& s) {
  json ports = json::array();
  for (const auto& p : s.ports) {
    json j = {{"name", p.name},
              {"protocol", protocolName(p.protocol)},
              {"port", p.port},
              {"targetPort", portRefJson(p.target_port)}};
    if (p.node_port != 0) j["nodePort"] = p.node_port;
    ports.push_back(j);
  }
  json out = {{"namespace", s.ns},
              {"name", s.name},
              {"labels", s.labels},
              {"type", serviceTypeName(s.type)},
              {"headless", s.headless},
              {"clusterIPs", s.cluster_ips},
              {"ipFamilyPolicy", s.ip_family_policy},
              {"ipFamilies", s.ip_families},
              {"ports", ports},
              {"externalIPs", s.external_ips},
              {"loadBalancerIPs", s.load_balancer_ips},
              {"sessionAffinity", sessionAffinityName(s.session_affinity)},
              {"internalTrafficPolicy", trafficPolicyName(s.internal_traffic_policy)},
              {"externalTrafficPolicy", trafficPolicyName(s.external_traffic_policy)},
              {"publishNotReadyAddresses", s.publish_not_ready_addresses},
              {"proxiedElsewhere", s.proxiedElsewhere()}};
  if (s.session_affinity == SessionAffinity::kClientIP) out["affinityTimeoutSeconds"] = s.affinity_timeout_seconds;
  return out;
}

json toJson(const EndpointSliceInfo& s) {
  json endpoints = json::array();
  for (const auto& e : s.endpoints) {
    json j = {{"addresses", e.addresses},
              {"conditions", {{"ready", e.ready}, {"serving", e.serving}, {"terminating", e.terminating}}},
              {"nodeName", e.node_name}};
    if (!e.target_ref.name.empty())
      j["targetRef"] = {{"kind", e.target_ref.kind}, {"namespace", e.target_ref.ns}, {"name", e.target_ref.name}};
    endpoints.push_back(j);
  }
  json ports = json::array();
  for (const auto& p : s.ports) {
    json j = {{"name", p.name}, {"protocol", protocolName(p.protocol)}};
    if (p.port != 0) j["port"] = p.port;
    ports.push_back(j);
  }
  return {{"namespace", s.ns},         {"name", s.name},          {"serviceName", s.service_name},
          {"addressType", addressTypeName(s.address_type)}, {"endpoints", endpoints}, {"ports", ports}};
}

json toJson(const NetworkPolicyInfo& p) {
  json types = json::array();
  if (p.policy_ingress) types.push_back("Ingress");
  if (p.policy_egress) types.push_back("Egress");
  return {{"namespace", p.ns},
          {"name", p.name},
          {"podSelector", toJson(p.pod_selector)},
          {"policyTypes", types},
          {"ingress", rulesJson(p.ingress, "from")},
          {"egress", rulesJson(p.egress, "to")}};
}

}  // namespace dpu::control
