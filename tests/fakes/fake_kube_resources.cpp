// The resource table, discovery, OpenAPI v3 stubs, selectors and Tables of the
// fake Kubernetes API server (see fake_kube_resources.h).
#include "fake_kube_resources.h"

#include <algorithm>
#include <ctime>
#include <regex>

namespace dpu::fakes {
namespace {

using nlohmann::json;

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get", "list", "patch", "update",
                                            "watch"};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Splits at `sep` outside parentheses ("a in (x,y),b" -> "a in (x,y)", "b").
std::vector<std::string> splitTop(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '(') depth++;
    if (c == ')') depth--;
    if (c == sep && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string humanAge(std::chrono::seconds d) {
  long s = static_cast<long>(d.count());
  if (s < 0) return "<invalid>";
  char buf[32];
  if (s < 120) {
    snprintf(buf, sizeof buf, "%lds", s);
    return buf;
  }
  long m = s / 60;
  if (m < 10) {
    if (s % 60 == 0) snprintf(buf, sizeof buf, "%ldm", m);
    else snprintf(buf, sizeof buf, "%ldm%lds", m, s % 60);
    return buf;
  }
  if (m < 180) {
    snprintf(buf, sizeof buf, "%ldm", m);
    return buf;
  }
  long h = m / 60;
  if (h < 8) {
    if (m % 60 == 0) snprintf(buf, sizeof buf, "%ldh", h);
    else snprintf(buf, sizeof buf, "%ldh%ldm", h, m % 60);
    return buf;
  }
  if (h < 48) snprintf(buf, sizeof buf, "%ldh", h);
  else if (h < 192) snprintf(buf, sizeof buf, "%ldd%ldh", h / 24, h % 24);
  else if (h < 24 * 365 * 2) snprintf(buf, sizeof buf, "%ldd", h / 24);
  else snprintf(buf, sizeof buf, "%ldy", h / (24 * 365));
  return buf;
}

std::chrono::system_clock::time_point parseTimestamp(const std::string& t) {
  std::tm tm{};
  if (strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::chrono::system_clock::time_point{};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string joinStrings(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string selectorText(const json& labels) {
  std::vector<std::string> parts;
  if (labels.is_object())
    for (auto it = labels.begin(); it != labels.end(); ++it)
      parts.push_back(it.key() + "=" + (it.value().is_string() ? it.value().get<std::string>() : it.value().dump()));
  return parts.empty() ? "<none>" : joinStrings(parts, ",");
}

struct Column {
  const char* name;
  const char* type;
  int priority;
  const char* format;
};

json columnDefs(const std::vector<Column>& cols) {
  json out = json::array();
  for (const auto& c : cols)
    out.push_back({{"name", c.name}, {"type", c.type}, {"format", c.format}, {"description", ""}, {"priority", c.priority}});
  return out;
}

std::string str(const json& o, const json::json_pointer& p, const std::string& fallback = "") {
  if (!o.contains(p)) return fallback;
  const json& v = o.at(p);
  return v.is_string() ? v.get<std::string>() : fallback;
}

json nodeRow(const json& o, const std::string& age) {
  std::string ready = "Unknown";
  for (const auto& c : o.value("/status/conditions"_json_pointer, json::array()))
    if (c.value("type", "") == "Ready") ready = c.value("status", "") == "True" ? "Ready" : "NotReady";
  if (o.value("/spec/unschedulable"_json_pointer, false)) ready += ",SchedulingDisabled";
  std::vector<std::string> roles;
  const json labels = o.value("/metadata/labels"_json_pointer, json::object());
  for (const auto& [k, v] : labels.items())
    if (k.rfind("node-role.kubernetes.io/", 0) == 0) roles.push_back(k.substr(24));
  std::string internal = "<none>", external = "<none>";
  for (const auto& a : o.value("/status/addresses"_json_pointer, json::array())) {
    if (a.value("type", "") == "InternalIP" && internal == "<none>") internal = a.value("address", "");
    if (a.value("type", "") == "ExternalIP" && external == "<none>") external = a.value("address", "");
  }
  auto info = [&](const char* k) { return str(o, json::json_pointer(std::string("/status/nodeInfo/") + k), "<unknown>"); };
  return json::array({str(o, "/metadata/name"_json_pointer), ready, roles.empty() ? "<none>" : joinStrings(roles, ","),
                      age, str(o, "/status/nodeInfo/kubeletVersion"_json_pointer, ""), internal, external,
                      info("osImage"), info("kernelVersion"), info("containerRuntimeVersion")});
}

json podRow(const json& o, const std::string& age) {
  size_t containers = o.value("/spec/containers"_json_pointer, json::array()).size();
  size_t ready = 0;
  int64_t restarts = 0;
  for (const auto& s : o.value("/status/containerStatuses"_json_pointer, json::array())) {
    ready += s.value("ready", false) ? 1 : 0;
    restarts += s.value("restartCount", 0);
  }
  std::string status = str(o, "/status/reason"_json_pointer, str(o, "/status/phase"_json_pointer, "Pending"));
  if (o.contains("/metadata/deletionTimestamp"_json_pointer)) status = "Terminating";
  std::string gates = "<none>";
  auto rg = o.value("/spec/readinessGates"_json_pointer, json::array());
  if (!rg.empty()) gates = std::to_string(rg.size());
  return json::array({str(o, "/metadata/name"_json_pointer), std::to_string(ready) + "/" + std::to_string(containers),
                      status, restarts, age, str(o, "/status/podIP"_json_pointer, "<none>"),
                      str(o, "/spec/nodeName"_json_pointer, "<none>"),
                      str(o, "/status/nominatedNodeName"_json_pointer, "<none>"), gates});
}

json serviceRow(const json& o, const std::string& age) {
  std::vector<std::string> ports;
  for (const auto& p : o.value("/spec/ports"_json_pointer, json::array())) {
    std::string t = std::to_string(p.value("port", 0));
    if (p.contains("nodePort")) t += ":" + std::to_string(p.value("nodePort", 0));
    ports.push_back(t + "/" + p.value("protocol", "TCP"));
  }
  std::vector<std::string> external;
  for (const auto& ip : o.value("/spec/externalIPs"_json_pointer, json::array()))
    if (ip.is_string()) external.push_back(ip.get<std::string>());
  for (const auto& i : o.value("/status/loadBalancer/ingress"_json_pointer, json::array()))
    if (i.contains("ip")) external.push_back(i.value("ip", ""));
  std::string type = str(o, "/spec/type"_json_pointer, "ClusterIP");
  std::string ext = external.empty() ? (type == "LoadBalancer" ? "<pending>" : "<none>") : joinStrings(external, ",");
  return json::array({str(o, "/metadata/name"_json_pointer), type, str(o, "/spec/clusterIP"_json_pointer, "<none>"), ext,
                      ports.empty() ? "<none>" : joinStrings(ports, ","), age,
                      selectorText(o.value("/spec/selector"_json_pointer, json::object()))});
}

json endpointSliceRow(const json& o, const std::string& age) {
  std::vector<std::string> ports, addresses;
  for (const auto& p : o.value("ports", json::array()))
    if (p.contains("port")) ports.push_back(std::to_string(p.value("port", 0)));
  for (const auto& e : o.value("endpoints", json::array()))
    for (const auto& a : e.value("addresses", json::array()))
      if (a.is_string()) addresses.push_back(a.get<std::string>());
  std::string eps = "<none>";
  if (!addresses.empty()) {
    std::vector<std::string> first(addresses.begin(), addresses.begin() + std::min<size_t>(3, addresses.size()));
    eps = joinStrings(first, ",");
    if (addresses.size() > 3) eps += " + " + std::to_string(addresses.size() - 3) + " more...";
  }
  return json::array({str(o, "/metadata/name"_json_pointer), o.value("addressType", ""),
                      ports.empty() ? "<unset>" : joinStrings(ports, ","), eps, age});
}

json networkPolicyRow(const json& o, const std::string& age) {
  json sel = o.value("/spec/podSelector/matchLabels"_json_pointer, json::object());
  return json::array({str(o, "/metadata/name"_json_pointer), selectorText(sel), age});
}

json namespaceRow(const json& o, const std::string& age) {
  return json::array({str(o, "/metadata/name"_json_pointer), str(o, "/status/phase"_json_pointer, "Active"), age});
}

}  // namespace

std::string KubeKind::apiVersion() const {
  return std::string(group).empty() ? version : std::string(group) + "/" + version;
}

std::string KubeKind::groupPrefix() const {
  return std::string(group).empty() ? std::string("/api/") + version : std::string("/apis/") + group + "/" + version;
}

const std::vector<KubeKind>& kubeKinds() {
  static const std::vector<KubeKind> kinds = {
      {KubeResource::kNodes, "nodes", "node", "Node", "NodeList", "", "v1", false, {"no"}, true,
       KubeNameRule::kSubdomain},
      {KubeResource::kPods, "pods", "pod", "Pod", "PodList", "", "v1", true, {"po"}, true, KubeNameRule::kSubdomain},
      {KubeResource::kServices, "services", "service", "Service", "ServiceList", "", "v1", true, {"svc"}, true,
       KubeNameRule::kRfc1035Label},
      {KubeResource::kEndpointSlices, "endpointslices", "endpointslice", "EndpointSlice", "EndpointSliceList",
       "discovery.k8s.io", "v1", true, {}, false, KubeNameRule::kSubdomain},
      {KubeResource::kNetworkPolicies, "networkpolicies", "networkpolicy", "NetworkPolicy", "NetworkPolicyList",
       "networking.k8s.io", "v1", true, {"netpol"}, false, KubeNameRule::kSubdomain},
      {KubeResource::kNamespaces, "namespaces", "namespace", "Namespace", "NamespaceList", "", "v1", false, {"ns"},
       true, KubeNameRule::kLabel},
  };
  return kinds;
}

const KubeKind& kubeKind(KubeResource r) { return kubeKinds()[static_cast<size_t>(r)]; }

const KubeKind* kubeKindByPlural(const std::string& group, const std::string& version, const std::string& plural) {
  for (const auto& k : kubeKinds())
    if (plural == k.plural && group == k.group && version == k.version) return &k;
  return nullptr;
}

const KubeKind* kubeKindByControlName(const std::string& plural) {
  for (const auto& k : kubeKinds())
    if (plural == k.plural) return &k;
  return nullptr;
}

std::string kubeNameProblem(KubeNameRule rule, const std::string& name) {
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  static const std::regex kRfc1035("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  static const std::regex kSubdomain("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  switch (rule) {
    case KubeNameRule::kLabel:
      if (name.size() > 63 || !std::regex_match(name, kLabel))
        return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
               "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
      return "";
    case KubeNameRule::kRfc1035Label:
      if (name.size() > 63 || !std::regex_match(name, kRfc1035))
        return "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
               "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
               "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
      return "";
    case KubeNameRule::kSubdomain:
      if (name.size() > 253 || !std::regex_match(name, kSubdomain))
        return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
      return "";
  }
  return "";
}

json discoveryApiVersions(const std::string& server) {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server}}}}};
}

json discoveryGroup(const std::string& group) {
  for (const auto& k : kubeKinds()) {
    if (group != k.group || group.empty()) continue;
    json v = {{"groupVersion", k.apiVersion()}, {"version", k.version}};
    return {{"kind", "APIGroup"}, {"apiVersion", "v1"}, {"name", group}, {"versions", {v}}, {"preferredVersion", v}};
  }
  return nullptr;
}

json discoveryGroupList() {
  json groups = json::array();
  std::vector<std::string> seen;
  for (const auto& k : kubeKinds()) {
    std::string g = k.group;
    if (g.empty() || std::find(seen.begin(), seen.end(), g) != seen.end()) continue;
    seen.push_back(g);
    json d = discoveryGroup(g);
    d.erase("kind");
    d.erase("apiVersion");
    groups.push_back(d);
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

json discoveryResourceList(const std::string& group, const std::string& version) {
  json resources = json::array();
  std::string gv;
  for (const auto& k : kubeKinds()) {
    if (group != k.group || version != k.version) continue;
    gv = k.apiVersion();
    json r = {{"name", k.plural},   {"singularName", k.singular}, {"namespaced", k.namespaced},
              {"kind", k.kind},     {"verbs", kAllVerbs}};
    if (!k.short_names.empty()) r["shortNames"] = k.short_names;
    if (k.id == KubeResource::kPods || k.id == KubeResource::kServices) r["categories"] = {"all"};
    resources.push_back(r);
    if (k.status_subresource)
      resources.push_back({{"name", std::string(k.plural) + "/status"},
                           {"singularName", ""},
                           {"namespaced", k.namespaced},
                           {"kind", k.kind},
                           {"verbs", {"get", "patch", "update"}}});
  }
  if (gv.empty()) return nullptr;
  return {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", gv}, {"resources", resources}};
}

json openApiV3Root() {
  json paths = json::object();
  for (const auto& k : kubeKinds()) {
    std::string p = k.groupPrefix().substr(1);
    paths[p] = {{"serverRelativeURL", "/openapi/v3/" + p + "?hash=dpu-cni-fake-1"}};
  }
  return {{"paths", paths}};
}

json openApiV3GroupVersion(const std::string& gv_path) {
  json paths = json::object();
  bool any = false;
  json field_validation = {{"name", "fieldValidation"},
                           {"in", "query"},
                           {"description", "Strict, Warn or Ignore: what the server does with unknown or duplicate "
                                           "fields (the fake API server implements all three)"},
                           {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
  for (const auto& k : kubeKinds()) {
    if (k.groupPrefix().substr(1) != gv_path) continue;
    any = true;
    std::string item = k.groupPrefix() + (k.namespaced ? "/namespaces/{namespace}/" : "/") + k.plural + "/{name}";
    json gvk = {{"group", k.group}, {"version", k.version}, {"kind", k.kind}};
    json params = json::array({field_validation, {{"name", "name"}, {"in", "path"}, {"required", true},
                                                  {"schema", {{"type", "string"}, {"uniqueItems", true}}}}});
    if (k.namespaced)
      params.push_back({{"name", "namespace"}, {"in", "path"}, {"required", true},
                        {"schema", {{"type", "string"}, {"uniqueItems", true}}}});
    paths[item] = {{"parameters", params},
                   {"patch",
                    {{"operationId", std::string("patch") + k.kind},
                     {"parameters", json::array({field_validation})},
                     {"responses", {{"200", {{"description", "OK"}}}}},
                     {"x-kubernetes-action", "patch"},
                     {"x-kubernetes-group-version-kind", gvk}}}};
  }
  if (!any) return nullptr;
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes (fake API server)"}, {"version", "v1.32.0"}}},
          {"paths", paths},
          {"components", {{"schemas", json::object()}}}};
}

Result<LabelSelector> LabelSelector::parse(const std::string& text) {
  LabelSelector sel;
  if (trim(text).empty()) return sel;
  static const std::regex kSet(R"(^\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$)");
  static const std::regex kCmp(R"(^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$)");
  static const std::regex kExists(R"(^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*$)");
  for (const auto& part : splitTop(text, ',')) {
    std::smatch m;
    Term t;
    if (std::regex_match(part, m, kSet)) {
      t.key = m[1];
      t.op = m[2] == "in" ? Term::Op::kIn : Term::Op::kNotIn;
      for (const auto& v : splitTop(m[3], ',')) t.values.push_back(trim(v));
    } else if (std::regex_match(part, m, kCmp)) {
      t.key = m[1];
      t.op = m[2] == "!=" ? Term::Op::kNe : Term::Op::kEq;
      t.values.push_back(m[3]);
    } else if (std::regex_match(part, m, kExists)) {
      t.key = m[2];
      t.op = m[1] == "!" ? Term::Op::kNotExists : Term::Op::kExists;
    } else {
      return Error{"unable to parse requirement: found '" + trim(part) + "', expected: a label selector term",
                   ErrorCode::kInvalid};
    }
    sel.terms_.push_back(std::move(t));
  }
  return sel;
}

bool LabelSelector::matches(const json& labels) const {
  for (const auto& t : terms_) {
    bool has = labels.is_object() && labels.contains(t.key) && labels[t.key].is_string();
    std::string v = has ? labels[t.key].get<std::string>() : "";
    bool in = has && std::find(t.values.begin(), t.values.end(), v) != t.values.end();
    switch (t.op) {
      case Term::Op::kEq:
      case Term::Op::kIn:
        if (!in) return false;
        break;
      case Term::Op::kNe:
      case Term::Op::kNotIn:
        if (in) return false;
        break;
      case Term::Op::kExists:
        if (!has) return false;
        break;
      case Term::Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

Result<FieldSelector> FieldSelector::parse(const std::string& text, const KubeKind& kind) {
  FieldSelector sel;
  if (trim(text).empty()) return sel;
  std::vector<std::string> allowed = {"metadata.name", "metadata.namespace"};
  switch (kind.id) {
    case KubeResource::kPods:
      for (const char* f : {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"})
        allowed.push_back(f);
      break;
    case KubeResource::kNodes: allowed.push_back("spec.unschedulable"); break;
    case KubeResource::kNamespaces: allowed.push_back("status.phase"); break;
    case KubeResource::kServices:
      allowed.push_back("spec.clusterIP");
      allowed.push_back("spec.type");
      break;
    default: break;
  }
  for (const auto& part : splitTop(text, ',')) {
    std::string p = trim(part);
    size_t ne = p.find("!="), eq = p.find('=');
    if (eq == std::string::npos)
      return Error{"invalid field selector: '" + p + "': expected FIELD=VALUE or FIELD!=VALUE", ErrorCode::kInvalid};
    Term t;
    t.equal = ne == std::string::npos;
    t.path = trim(p.substr(0, t.equal ? eq : ne));
    std::string rest = p.substr(t.equal ? eq + 1 : ne + 2);
    if (t.equal && !rest.empty() && rest[0] == '=') rest = rest.substr(1);
    t.value = trim(rest);
    if (std::find(allowed.begin(), allowed.end(), t.path) == allowed.end())
      return Error{"field label not supported: " + t.path, ErrorCode::kInvalid};
    sel.terms_.push_back(std::move(t));
  }
  return sel;
}

std::string fieldValue(const json& o, const std::string& path) {
  const json* cur = &o;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(part)) return "";
    cur = &(*cur)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_null()) return "";
  return cur->dump();
}

bool FieldSelector::matches(const json& o) const {
  for (const auto& t : terms_) {
    std::string v = fieldValue(o, t.path);
    // Unset booleans read as "false", as the real server's field sets do.
    if (v.empty() && (t.path == "spec.hostNetwork" || t.path == "spec.unschedulable")) v = "false";
    if ((v == t.value) != t.equal) return false;
  }
  return true;
}

std::string kubeTimestamp(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json kubeTable(const KubeKind& kind, const std::vector<json>& items, const json& list_meta,
               std::chrono::system_clock::time_point now) {
  std::vector<Column> cols;
  json (*row)(const json&, const std::string&) = nullptr;
  switch (kind.id) {
    case KubeResource::kNodes:
      cols = {{"Name", "string", 0, "name"},          {"Status", "string", 0, ""},
              {"Roles", "string", 0, ""},             {"Age", "string", 0, ""},
              {"Version", "string", 0, ""},           {"Internal-IP", "string", 1, ""},
              {"External-IP", "string", 1, ""},       {"OS-Image", "string", 1, ""},
              {"Kernel-Version", "string", 1, ""},    {"Container-Runtime", "string", 1, ""}};
      row = nodeRow;
      break;
    case KubeResource::kPods:
      cols = {{"Name", "string", 0, "name"},  {"Ready", "string", 0, ""},          {"Status", "string", 0, ""},
              {"Restarts", "string", 0, ""},  {"Age", "string", 0, ""},            {"IP", "string", 1, ""},
              {"Node", "string", 1, ""},      {"Nominated Node", "string", 1, ""}, {"Readiness Gates", "string", 1, ""}};
      row = podRow;
      break;
    case KubeResource::kServices:
      cols = {{"Name", "string", 0, "name"}, {"Type", "string", 0, ""},     {"Cluster-IP", "string", 0, ""},
              {"External-IP", "string", 0, ""}, {"Port(s)", "string", 0, ""}, {"Age", "string", 0, ""},
              {"Selector", "string", 1, ""}};
      row = serviceRow;
      break;
    case KubeResource::kEndpointSlices:
      cols = {{"Name", "string", 0, "name"}, {"AddressType", "string", 0, ""}, {"Ports", "string", 0, ""},
              {"Endpoints", "string", 0, ""}, {"Age", "string", 0, ""}};
      row = endpointSliceRow;
      break;
    case KubeResource::kNetworkPolicies:
      cols = {{"Name", "string", 0, "name"}, {"Pod-Selector", "string", 0, ""}, {"Age", "string", 0, ""}};
      row = networkPolicyRow;
      break;
    case KubeResource::kNamespaces:
      cols = {{"Name", "string", 0, "name"}, {"Status", "string", 0, ""}, {"Age", "string", 0, ""}};
      row = namespaceRow;
      break;
  }
  json rows = json::array();
  for (const auto& o : items) {
    std::string created = str(o, "/metadata/creationTimestamp"_json_pointer);
    std::string age = created.empty()
                          ? "<unknown>"
                          : humanAge(std::chrono::duration_cast<std::chrono::seconds>(now - parseTimestamp(created)));
    rows.push_back({{"cells", row(o, age)},
                    {"object",
                     {{"kind", "PartialObjectMetadata"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", o.value("metadata", json::object())}}}});
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", list_meta},
          {"columnDefinitions", columnDefs(cols)},
          {"rows", rows}};
}

}  // namespace dpu::fakes
