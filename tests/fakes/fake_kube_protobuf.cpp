// Kubernetes protobuf bodies → the JSON the fake API server stores (see
// fake_kube_protobuf.h). A table per message type (field number, JSON name,
// how to read it) drives one decoder over the protobuf wire format; the
// numbers are those of k8s.io/api and k8s.io/apimachinery generated.proto,
// which are stable across releases (fields are only ever added).
#include "fake_kube_protobuf.h"

#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <vector>

namespace dpu::fakes {
namespace {

using nlohmann::json;

enum class T {
  kString,        // optional string
  kInt32,         // optional int32 (varint, sign-extended to 64 bits on the wire)
  kInt64,         // optional int64
  kBool,          // optional bool
  kMessage,       // optional message (`type`)
  kStrings,       // repeated string
  kMessages,      // repeated message (`type`)
  kStringMap,     // map<string, string> (repeated {key = 1, value = 2})
  kIntOrString,   // k8s.io.apimachinery.pkg.util.intstr.IntOrString
  kTime,          // k8s.io.apimachinery.pkg.apis.meta.v1.Time: RFC 3339 text in JSON
};

struct Message;

struct Field {
  uint32_t number;
  const char* name;
  T type;
  const Message* message = nullptr;
  // A pointer field in the Go type (*bool, *string, *int64): sent only when
  // set, so a zero value that arrives means something and is kept. Other
  // fields are always sent and their zero value is what JSON leaves out.
  bool presence = false;
};

struct Message {
  const char* name;
  std::vector<Field> fields;
  const Field* find(uint32_t n) const {
    for (const auto& f : fields)
      if (f.number == n) return &f;
    return nullptr;
  }
};

// --- k8s.io/apimachinery meta/v1 ------------------------------------------------
const Message kOwnerReference{"OwnerReference",
                              {{5, "apiVersion", T::kString},
                               {1, "kind", T::kString},
                               {3, "name", T::kString},
                               {4, "uid", T::kString},
                               {6, "controller", T::kBool, nullptr, true},
                               {7, "blockOwnerDeletion", T::kBool, nullptr, true}}};
const Message kObjectMeta{"ObjectMeta",
                          {{1, "name", T::kString},
                           {2, "generateName", T::kString},
                           {3, "namespace", T::kString},
                           {4, "selfLink", T::kString},
                           {5, "uid", T::kString},
                           {6, "resourceVersion", T::kString},
                           {7, "generation", T::kInt64},
                           {8, "creationTimestamp", T::kTime},
                           {9, "deletionTimestamp", T::kTime},
                           {10, "deletionGracePeriodSeconds", T::kInt64, nullptr, true},
                           {11, "labels", T::kStringMap},
                           {12, "annotations", T::kStringMap},
                           {13, "ownerReferences", T::kMessages, &kOwnerReference},
                           {14, "finalizers", T::kStrings}}};
const Message kCondition{"Condition",
                         {{1, "type", T::kString},
                          {2, "status", T::kString},
                          {3, "observedGeneration", T::kInt64},
                          {4, "lastTransitionTime", T::kTime},
                          {5, "reason", T::kString},
                          {6, "message", T::kString}}};
const Message kPreconditions{"Preconditions",
                             {{1, "uid", T::kString, nullptr, true}, {2, "resourceVersion", T::kString, nullptr, true}}};
const Message kDeleteOptions{"DeleteOptions",
                             {{1, "gracePeriodSeconds", T::kInt64, nullptr, true},
                              {2, "preconditions", T::kMessage, &kPreconditions},
                              {3, "orphanDependents", T::kBool, nullptr, true},
                              {4, "propagationPolicy", T::kString, nullptr, true},
                              {5, "dryRun", T::kStrings}}};

// --- k8s.io/api core/v1 --------------------------------------------------------------
const Message kNamespaceCondition{"NamespaceCondition",
                                  {{1, "type", T::kString},
                                   {2, "status", T::kString},
                                   {4, "lastTransitionTime", T::kTime},
                                   {5, "reason", T::kString},
                                   {6, "message", T::kString}}};
const Message kNamespaceSpec{"NamespaceSpec", {{1, "finalizers", T::kStrings}}};
const Message kNamespaceStatus{"NamespaceStatus",
                               {{1, "phase", T::kString}, {2, "conditions", T::kMessages, &kNamespaceCondition}}};
const Message kNamespace{"Namespace",
                         {{1, "metadata", T::kMessage, &kObjectMeta},
                          {2, "spec", T::kMessage, &kNamespaceSpec},
                          {3, "status", T::kMessage, &kNamespaceStatus}}};

const Message kServicePort{"ServicePort",
                           {{1, "name", T::kString},
                            {2, "protocol", T::kString},
                            {6, "appProtocol", T::kString, nullptr, true},
                            {3, "port", T::kInt32},
                            {4, "targetPort", T::kIntOrString},
                            {5, "nodePort", T::kInt32}}};
const Message kClientIPConfig{"ClientIPConfig", {{1, "timeoutSeconds", T::kInt32, nullptr, true}}};
const Message kSessionAffinityConfig{"SessionAffinityConfig", {{1, "clientIP", T::kMessage, &kClientIPConfig}}};
const Message kServiceSpec{"ServiceSpec",
                           {{1, "ports", T::kMessages, &kServicePort},
                            {2, "selector", T::kStringMap},
                            {3, "clusterIP", T::kString},
                            {18, "clusterIPs", T::kStrings},
                            {4, "type", T::kString},
                            {5, "externalIPs", T::kStrings},
                            {7, "sessionAffinity", T::kString},
                            {8, "loadBalancerIP", T::kString},
                            {9, "loadBalancerSourceRanges", T::kStrings},
                            {10, "externalName", T::kString},
                            {11, "externalTrafficPolicy", T::kString},
                            {12, "healthCheckNodePort", T::kInt32},
                            {13, "publishNotReadyAddresses", T::kBool},
                            {14, "sessionAffinityConfig", T::kMessage, &kSessionAffinityConfig},
                            {19, "ipFamilies", T::kStrings},
                            {17, "ipFamilyPolicy", T::kString, nullptr, true},
                            {20, "allocateLoadBalancerNodePorts", T::kBool, nullptr, true},
                            {21, "loadBalancerClass", T::kString, nullptr, true},
                            {22, "internalTrafficPolicy", T::kString, nullptr, true},
                            {23, "trafficDistribution", T::kString, nullptr, true}}};
const Message kPortStatus{"PortStatus",
                          {{1, "port", T::kInt32}, {2, "protocol", T::kString}, {3, "error", T::kString, nullptr, true}}};
const Message kLoadBalancerIngress{"LoadBalancerIngress",
                                   {{1, "ip", T::kString},
                                    {2, "hostname", T::kString},
                                    {3, "ipMode", T::kString, nullptr, true},
                                    {4, "ports", T::kMessages, &kPortStatus}}};
const Message kLoadBalancerStatus{"LoadBalancerStatus", {{1, "ingress", T::kMessages, &kLoadBalancerIngress}}};
const Message kServiceStatus{"ServiceStatus",
                             {{1, "loadBalancer", T::kMessage, &kLoadBalancerStatus},
                              {2, "conditions", T::kMessages, &kCondition}}};
const Message kService{"Service",
                       {{1, "metadata", T::kMessage, &kObjectMeta},
                        {2, "spec", T::kMessage, &kServiceSpec},
                        {3, "status", T::kMessage, &kServiceStatus}}};

// The envelope.
const Message kTypeMeta{"TypeMeta", {{1, "apiVersion", T::kString}, {2, "kind", T::kString}}};

struct KindEntry {
  const char* api_version;
  const char* kind;
  const Message* message;
};
const KindEntry kKinds[] = {
    {"v1", "Namespace", &kNamespace},
    {"v1", "Service", &kService},
    {"v1", "DeleteOptions", &kDeleteOptions},
    {"meta.k8s.io/v1", "DeleteOptions", &kDeleteOptions},
};

// --- the wire format -------------------------------------------------------------------
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes) {}
  bool done() const { return p_.empty(); }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_.empty()) return false;
      auto b = static_cast<uint8_t>(p_[0]);
      p_.remove_prefix(1);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool bytes(std::string_view& out) {
    uint64_t n = 0;
    if (!varint(n) || n > p_.size()) return false;
    out = p_.substr(0, n);
    p_.remove_prefix(n);
    return true;
  }
  bool skip(uint32_t wire) {
    uint64_t v = 0;
    std::string_view b;
    switch (wire) {
      case 0: return varint(v);
      case 1: return advance(8);
      case 2: return bytes(b);
      case 5: return advance(4);
      default: return false;
    }
  }

 private:
  bool advance(size_t n) {
    if (p_.size() < n) return false;
    p_.remove_prefix(n);
    return true;
  }
  std::string_view p_;
};

Error invalid(const std::string& where, const std::string& what) {
  return Error{"the protobuf body cannot be decoded: " + where + ": " + what, ErrorCode::kInvalid};
}

bool isZero(const json& v) {
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         (v.is_number_integer() && v.get<int64_t>() == 0) || (v.is_boolean() && !v.get<bool>()) ||
         ((v.is_object() || v.is_array()) && v.empty());
}

Result<json> decodeMessage(std::string_view bytes, const Message& m, const std::string& where, int depth);

std::string rfc3339(int64_t seconds) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One field's value from the wire; `wire` is its wire type.
Result<json> decodeValue(Reader& r, uint32_t wire, const Field& f, const std::string& where, int depth) {
  auto needs = [&](uint32_t want) -> std::optional<Error> {
    if (wire == want) return std::nullopt;
    return invalid(where, "wire type " + std::to_string(wire) + " for a field that is not encoded that way");
  };
  uint64_t v = 0;
  std::string_view b;
  switch (f.type) {
    case T::kString:
    case T::kStrings:
      if (auto e = needs(2)) return *e;
      if (!r.bytes(b)) return invalid(where, "truncated");
      return json(std::string(b));
    case T::kInt32:
      if (auto e = needs(0)) return *e;
      if (!r.varint(v)) return invalid(where, "truncated varint");
      return json(static_cast<int64_t>(static_cast<int32_t>(v)));
    case T::kInt64:
      if (auto e = needs(0)) return *e;
      if (!r.varint(v)) return invalid(where, "truncated varint");
      return json(static_cast<int64_t>(v));
    case T::kBool:
      if (auto e = needs(0)) return *e;
      if (!r.varint(v)) return invalid(where, "truncated varint");
      return json(v != 0);
    case T::kMessage:
    case T::kMessages:
      if (auto e = needs(2)) return *e;
      if (!r.bytes(b)) return invalid(where, "truncated");
      return decodeMessage(b, *f.message, where, depth + 1);
    case T::kStringMap: {
      if (auto e = needs(2)) return *e;
      if (!r.bytes(b)) return invalid(where, "truncated");
      Reader entry(b);
      std::string key, value;
      while (!entry.done()) {
        uint64_t tag = 0;
        std::string_view s;
        if (!entry.varint(tag) || (tag & 7) != 2 || !entry.bytes(s)) return invalid(where, "a malformed map entry");
        if ((tag >> 3) == 1) key = s;
        else if ((tag >> 3) == 2) value = s;
        else return invalid(where, "a map entry with field " + std::to_string(tag >> 3));
      }
      return json::array({key, value});
    }
    case T::kIntOrString: {
      if (auto e = needs(2)) return *e;
      if (!r.bytes(b)) return invalid(where, "truncated");
      Reader in(b);
      int64_t type = 0;
      int32_t int_val = 0;
      std::string str_val;
      while (!in.done()) {
        uint64_t tag = 0, x = 0;
        std::string_view s;
        if (!in.varint(tag)) return invalid(where, "truncated IntOrString");
        switch (tag) {
          case (1 << 3) | 0: if (!in.varint(x)) return invalid(where, "truncated IntOrString"); type = static_cast<int64_t>(x); break;
          case (2 << 3) | 0: if (!in.varint(x)) return invalid(where, "truncated IntOrString"); int_val = static_cast<int32_t>(x); break;
          case (3 << 3) | 2: if (!in.bytes(s)) return invalid(where, "truncated IntOrString"); str_val = s; break;
          default: return invalid(where, "IntOrString field " + std::to_string(tag >> 3));
        }
      }
      if (type == 0) return json(int_val);
      if (type == 1) return json(str_val);
      return invalid(where, "IntOrString type " + std::to_string(type) + " (0 is an int, 1 a string)");
    }
    case T::kTime: {
      if (auto e = needs(2)) return *e;
      if (!r.bytes(b)) return invalid(where, "truncated");
      Reader in(b);
      int64_t seconds = 0;
      while (!in.done()) {
        uint64_t tag = 0, x = 0;
        if (!in.varint(tag) || (tag & 7) != 0 || !in.varint(x)) return invalid(where, "a malformed Time");
        if ((tag >> 3) == 1) seconds = static_cast<int64_t>(x);
        else if ((tag >> 3) != 2) return invalid(where, "Time field " + std::to_string(tag >> 3));
      }
      // The zero time is what Go's JSON writes as null (an unset timestamp).
      if (seconds == 0) return json(nullptr);
      return json(rfc3339(seconds));
    }
  }
  return invalid(where, "unknown field type");
}

Result<json> decodeMessage(std::string_view bytes, const Message& m, const std::string& where, int depth) {
  if (depth > 16) return invalid(where, "nested too deeply");
  json out = json::object();
  std::map<std::string, bool> present;  // fields with presence that arrived
  Reader r(bytes);
  while (!r.done()) {
    uint64_t tag = 0;
    if (!r.varint(tag)) return invalid(where.empty() ? m.name : where, "truncated field tag");
    auto number = static_cast<uint32_t>(tag >> 3);
    auto wire = static_cast<uint32_t>(tag & 7);
    const Field* f = m.find(number);
    if (!f)
      return Error{std::string("the protobuf body has field ") + std::to_string(number) + " of " + m.name +
                       (where.empty() ? "" : " (at " + where + ")") +
                       ", which the fake API server does not decode: send the object as JSON "
                       "(Content-Type: application/json)",
                   ErrorCode::kNotSupported};
    std::string at = where.empty() ? f->name : where + "." + f->name;
    auto value = decodeValue(r, wire, *f, at, depth);
    if (!value) return value;
    switch (f->type) {
      case T::kStrings:
      case T::kMessages:
        out[f->name].push_back(std::move(*value));
        break;
      case T::kStringMap:
        out[f->name][(*value)[0].get<std::string>()] = (*value)[1];
        break;
      default:
        out[f->name] = std::move(*value);
        if (f->presence) present[f->name] = true;
    }
  }
  for (auto it = out.begin(); it != out.end();) {
    if (isZero(it.value()) && !present.count(it.key()))
      it = out.erase(it);
    else
      ++it;
  }
  return out;
}

}  // namespace

bool isKubeProtobuf(std::string_view content_type) {
  return content_type.find("application/vnd.kubernetes.protobuf") != std::string_view::npos;
}

Result<json> decodeKubeProtobuf(std::string_view body) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, 4) != kMagic)
    return invalid("the envelope", "it does not start with the magic bytes \"k8s\\0\"");
  Reader r(body.substr(4));
  std::string api_version, kind;
  std::string_view raw;
  bool have_raw = false;
  while (!r.done()) {
    uint64_t tag = 0;
    std::string_view b;
    if (!r.varint(tag)) return invalid("the envelope", "truncated field tag");
    uint32_t number = static_cast<uint32_t>(tag >> 3), wire = static_cast<uint32_t>(tag & 7);
    if (number == 1 && wire == 2) {
      if (!r.bytes(b)) return invalid("the envelope", "truncated typeMeta");
      auto tm = decodeMessage(b, kTypeMeta, "typeMeta", 0);
      if (!tm) return tm;
      api_version = tm->value("apiVersion", "");
      kind = tm->value("kind", "");
    } else if (number == 2 && wire == 2) {
      if (!r.bytes(raw)) return invalid("the envelope", "truncated raw");
      have_raw = true;
    } else if ((number == 3 || number == 4) && wire == 2) {
      if (!r.bytes(b)) return invalid("the envelope", "truncated contentEncoding/contentType");
      if (!b.empty() && number == 3) return invalid("the envelope", "contentEncoding " + std::string(b) + " is not supported");
      if (!b.empty() && number == 4 && b != "application/vnd.kubernetes.protobuf")
        return invalid("the envelope", "raw in " + std::string(b) + " is not supported");
    } else if (!r.skip(wire)) {
      return invalid("the envelope", "malformed field " + std::to_string(number));
    }
  }
  if (kind.empty() || api_version.empty()) return invalid("the envelope", "no typeMeta with apiVersion and kind");
  if (!have_raw) return invalid("the envelope", "no raw object");
  for (const auto& k : kKinds) {
    if (api_version != k.api_version || kind != k.kind) continue;
    auto obj = decodeMessage(raw, *k.message, "", 0);
    if (!obj) return obj;
    json out = {{"apiVersion", api_version}, {"kind", kind}};
    out.update(*obj);
    return out;
  }
  return Error{"the fake API server decodes protobuf bodies of v1 Namespace, v1 Service and DeleteOptions only, not " +
                   api_version + " " + kind + ": send it as JSON (Content-Type: application/json)",
               ErrorCode::kNotSupported};
}

}  // namespace dpu::fakes
