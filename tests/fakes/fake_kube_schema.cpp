// Field checks and strategic merge patch over the generated field tree (see
// fake_kube_schema.h). The patch merge keys are the `patchMergeKey` /
// `patchStrategy` tags of the Kubernetes Go types for the kinds the fake
// stores; the generated tree carries fields and types only.
#include "fake_kube_schema.h"

#include <algorithm>
#include <cstring>
#include <regex>

namespace dpu::fakes {

extern const char* const kKubeFieldsJson;  // kube_fields.json, compiled in (CMake)

namespace {

using nlohmann::json;

struct MergeRule {
  const char* key;  // the element's identity; "" for a list of scalars merged as a set
};

// "Type.field" -> how the list merges. Lists not named here are replaced whole.
const std::map<std::string, MergeRule>& mergeRules() {
  static const std::map<std::string, MergeRule> rules = {
      {"IoK8sApimachineryPkgApisMetaV1ObjectMeta.finalizers", {""}},
      {"IoK8sApimachineryPkgApisMetaV1ObjectMeta.ownerReferences", {"uid"}},
      {"IoK8sApiCoreV1PodSpec.containers", {"name"}},
      {"IoK8sApiCoreV1PodSpec.initContainers", {"name"}},
      {"IoK8sApiCoreV1PodSpec.ephemeralContainers", {"name"}},
      {"IoK8sApiCoreV1PodSpec.volumes", {"name"}},
      {"IoK8sApiCoreV1PodSpec.imagePullSecrets", {"name"}},
      {"IoK8sApiCoreV1PodSpec.hostAliases", {"ip"}},
      {"IoK8sApiCoreV1PodSpec.topologySpreadConstraints", {"topologyKey"}},
      {"IoK8sApiCoreV1PodSpec.resourceClaims", {"name"}},
      {"IoK8sApiCoreV1PodSpec.schedulingGates", {"name"}},
      {"IoK8sApiCoreV1Container.ports", {"containerPort"}},
      {"IoK8sApiCoreV1Container.env", {"name"}},
      {"IoK8sApiCoreV1Container.volumeMounts", {"mountPath"}},
      {"IoK8sApiCoreV1Container.volumeDevices", {"devicePath"}},
      {"IoK8sApiCoreV1EphemeralContainer.ports", {"containerPort"}},
      {"IoK8sApiCoreV1EphemeralContainer.env", {"name"}},
      {"IoK8sApiCoreV1EphemeralContainer.volumeMounts", {"mountPath"}},
      {"IoK8sApiCoreV1EphemeralContainer.volumeDevices", {"devicePath"}},
      {"IoK8sApiCoreV1PodStatus.conditions", {"type"}},
      {"IoK8sApiCoreV1PodStatus.podIPs", {"ip"}},
      {"IoK8sApiCoreV1PodStatus.hostIPs", {"ip"}},
      {"IoK8sApiCoreV1ServiceSpec.ports", {"port"}},
      {"IoK8sApiCoreV1NodeSpec.podCIDRs", {""}},
      {"IoK8sApiCoreV1NodeStatus.conditions", {"type"}},
      {"IoK8sApiCoreV1NodeStatus.addresses", {"type"}},
      {"IoK8sApiCoreV1NamespaceStatus.conditions", {"type"}},
      {"IoK8sApiCoreV1ServiceStatus.conditions", {"type"}},
  };
  return rules;
}

// "IoK8sApiCoreV1PodSpec" -> "PodSpec", as Go names the struct in its errors.
std::string goName(const std::string& type) {
  static const std::regex kTail(R"(V[0-9]+(?:alpha[0-9]+|beta[0-9]+)?([A-Z][A-Za-z0-9]*)$)");
  std::smatch m;
  if (std::regex_search(type, m, kTail)) return m[1];
  return type;
}

const char* jsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "number";
    default: return "value";
  }
}

std::string goTypeOf(const std::string& desc) {
  if (desc == "string") return "string";
  if (desc == "number") return "int64";
  if (desc == "boolean") return "bool";
  if (desc.rfind("array:", 0) == 0) return "[]" + goTypeOf(desc.substr(6));
  if (desc.rfind("map:", 0) == 0) return "map[string]" + goTypeOf(desc.substr(4));
  if (desc.rfind("ref:", 0) == 0) return "v1." + goName(desc.substr(4));
  return desc;
}

std::string joinPath(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

std::string keyText(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

const KubeSchema& KubeSchema::builtin() {
  static const KubeSchema schema(json::parse(kKubeFieldsJson));
  return schema;
}

KubeSchema::KubeSchema(const json& doc) {
  for (const auto& [gvk, t] : doc.at("roots").items()) roots_[gvk] = t.get<std::string>();
  for (const auto& [name, t] : doc.at("types").items()) {
    Type& ty = types_[name];
    ty.name = name;
    for (const auto& [f, d] : t.at("fields").items()) ty.fields[f] = Field{d.get<std::string>()};
  }
}

std::string KubeSchema::rootType(const std::string& api_version, const std::string& kind) const {
  auto it = roots_.find(api_version + "/" + kind);
  return it == roots_.end() ? std::string() : it->second;
}

const KubeSchema::Type* KubeSchema::type(const std::string& name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

void KubeSchema::checkValue(const std::string& desc, json& v, const std::string& path, const std::string& owner,
                            bool prune, Findings& out) const {
  if (v.is_null() || desc == "any") return;  // null decodes as the zero value, as in Go
  auto wrong = [&](const std::string& go_type) {
    if (out.type_error.empty())
      out.type_error = std::string("json: cannot unmarshal ") + jsonTypeName(v) + " into Go struct field " + owner +
                       "." + path + " of type " + go_type;
  };
  if (desc == "string") {
    if (!v.is_string()) wrong("string");
  } else if (desc == "number") {
    if (!v.is_number()) wrong("int64");
  } else if (desc == "boolean") {
    if (!v.is_boolean()) wrong("bool");
  } else if (desc == "int-or-string") {
    if (!v.is_number() && !v.is_string()) wrong("intstr.IntOrString");
  } else if (desc.rfind("array:", 0) == 0) {
    if (!v.is_array()) return wrong(goTypeOf(desc));
    std::string elem = desc.substr(6);
    for (size_t i = 0; i < v.size(); ++i) checkValue(elem, v[i], path + "[" + std::to_string(i) + "]", owner, prune, out);
  } else if (desc.rfind("map:", 0) == 0) {
    if (!v.is_object()) return wrong(goTypeOf(desc));
    std::string elem = desc.substr(4);
    for (auto it = v.begin(); it != v.end(); ++it) checkValue(elem, it.value(), path + "." + it.key(), owner, prune, out);
  } else if (desc.rfind("ref:", 0) == 0) {
    const Type* t = type(desc.substr(4));
    if (t == nullptr) return;
    if (!v.is_object()) return wrong(goTypeOf(desc));
    for (auto it = v.begin(); it != v.end();) {
      auto f = t->fields.find(it.key());
      std::string child = joinPath(path, it.key());
      if (f == t->fields.end()) {
        out.unknown.push_back(child);
        if (prune) {
          it = v.erase(it);
          continue;
        }
      } else {
        checkValue(f->second.desc, it.value(), child, owner, prune, out);
      }
      ++it;
    }
  }
}

KubeSchema::Findings KubeSchema::check(const std::string& type_name, json& object, bool prune) const {
  Findings out;
  checkValue("ref:" + type_name, object, "", goName(type_name), prune, out);
  return out;
}

Result<void> KubeSchema::mergeList(const std::string& owner, const std::string& field, const std::string& elem_desc,
                                   json& target, const json& patch, const std::string& path) const {
  auto rule = mergeRules().find(owner + "." + field);
  if (rule == mergeRules().end()) {
    // No merge key: the list is replaced, directives removed.
    json out = json::array();
    for (const auto& e : patch)
      if (!(e.is_object() && e.contains("$patch"))) out.push_back(e);
    target = std::move(out);
    return {};
  }
  if (!target.is_array()) target = json::array();
  const std::string key = rule->second.key;
  if (key.empty()) {  // a set of scalars
    for (const auto& e : patch)
      if (std::find(target.begin(), target.end(), e) == target.end()) target.push_back(e);
    return {};
  }
  std::string elem_type = elem_desc.rfind("ref:", 0) == 0 ? elem_desc.substr(4) : "";
  // [{"$patch": "replace"}, ...]: the list becomes the other elements.
  for (const auto& e : patch) {
    if (e.is_object() && e.value("$patch", "") == "replace") {
      json out = json::array();
      for (const auto& x : patch)
        if (!(x.is_object() && x.contains("$patch"))) out.push_back(x);
      target = std::move(out);
      return {};
    }
  }
  for (const auto& e : patch) {
    if (!e.is_object() || !e.contains(key))
      return Error{"strategic merge patch: an element of " + path + " has no merge key '" + key + "'",
                   ErrorCode::kInvalid};
    auto same = std::find_if(target.begin(), target.end(),
                             [&](const json& t) { return t.is_object() && t.contains(key) && t[key] == e[key]; });
    std::string directive = e.value("$patch", "");
    if (directive == "delete") {
      if (same != target.end()) target.erase(same);
      continue;
    }
    if (same == target.end()) {
      json fresh = json::object();
      if (auto r = mergeObject(elem_type, fresh, e, path + "[" + key + "=" + keyText(e[key]) + "]"); !r) return r;
      target.push_back(std::move(fresh));
    } else if (auto r = mergeObject(elem_type, *same, e, path + "[" + key + "=" + keyText(e[key]) + "]"); !r) {
      return r;
    }
  }
  return {};
}

Result<void> KubeSchema::mergeObject(const std::string& type_name, json& target, const json& patch,
                                     const std::string& path) const {
  if (!patch.is_object()) {
    target = patch;
    return {};
  }
  if (!target.is_object()) target = json::object();
  std::string directive = patch.value("$patch", "");
  if (directive == "replace") {
    json out = patch;
    out.erase("$patch");
    target = std::move(out);
    return {};
  }
  if (directive == "delete") {
    target = json::object();
    return {};
  }
  if (!directive.empty() && directive != "merge")
    return Error{"strategic merge patch: unknown $patch directive '" + directive + "' at " + path, ErrorCode::kInvalid};
  const Type* t = type_name.empty() ? nullptr : type(type_name);
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    if (k == "$patch" || k == "$retainKeys" || k.rfind("$setElementOrder/", 0) == 0) continue;
    if (k.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      std::string field = k.substr(strlen("$deleteFromPrimitiveList/"));
      if (target.contains(field) && target[field].is_array() && it.value().is_array()) {
        json& list = target[field];
        for (const auto& v : it.value()) list.erase(std::remove(list.begin(), list.end(), v), list.end());
      }
      continue;
    }
    if (it.value().is_null()) {
      target.erase(k);
      continue;
    }
    std::string desc = "any";
    if (t != nullptr) {
      auto f = t->fields.find(k);
      if (f != t->fields.end()) desc = f->second.desc;
    }
    std::string child = joinPath(path, k);
    if (it.value().is_array() && desc.rfind("array:", 0) == 0) {
      if (auto r = mergeList(type_name, k, desc.substr(6), target[k], it.value(), child); !r) return r;
    } else if (it.value().is_object() && it.value().value("$patch", "") == "delete") {
      target.erase(k);
    } else if (it.value().is_object() && (desc.rfind("ref:", 0) == 0 || desc.rfind("map:", 0) == 0)) {
      std::string sub = desc.rfind("ref:", 0) == 0 ? desc.substr(4) : "";
      if (auto r = mergeObject(sub, target[k], it.value(), child); !r) return r;
    } else if (it.value().is_object() && desc == "any" && target.contains(k) && target[k].is_object()) {
      if (auto r = mergeObject("", target[k], it.value(), child); !r) return r;
    } else {
      target[k] = it.value();
    }
  }
  // $setElementOrder/<list>: the patch's order of a merged list (elements the
  // patch does not name keep their place after the named ones).
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    if (k.rfind("$setElementOrder/", 0) != 0 || !it.value().is_array()) continue;
    std::string field = k.substr(strlen("$setElementOrder/"));
    if (!target.contains(field) || !target[field].is_array()) continue;
    auto rule = mergeRules().find(type_name + "." + field);
    std::string key = rule == mergeRules().end() ? "" : rule->second.key;
    json& list = target[field];
    auto identity = [&](const json& e) -> json { return key.empty() || !e.is_object() ? e : e.value(key, json()); };
    json ordered = json::array();
    std::vector<bool> used(list.size(), false);
    for (const auto& want : it.value()) {
      json id = key.empty() || !want.is_object() ? want : want.value(key, json());
      for (size_t i = 0; i < list.size(); ++i)
        if (!used[i] && identity(list[i]) == id) {
          ordered.push_back(list[i]);
          used[i] = true;
          break;
        }
    }
    for (size_t i = 0; i < list.size(); ++i)
      if (!used[i]) ordered.push_back(list[i]);
    list = std::move(ordered);
  }
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    for (auto it = target.begin(); it != target.end();) {
      if (std::find(patch["$retainKeys"].begin(), patch["$retainKeys"].end(), it.key()) == patch["$retainKeys"].end())
        it = target.erase(it);
      else
        ++it;
    }
  }
  return {};
}

Result<void> KubeSchema::strategicMerge(const std::string& type_name, json& target, const json& patch) const {
  if (!patch.is_object()) return Error{"strategic merge patch: the patch is not a JSON object", ErrorCode::kInvalid};
  return mergeObject(type_name, target, patch, "");
}

}  // namespace dpu::fakes
