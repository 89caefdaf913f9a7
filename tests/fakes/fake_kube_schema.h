// The field tree of the kinds the fake Kubernetes API server stores
// (kube_fields.json, generated from the Kubernetes API's published types by
// tests/deploy/gen-kube-fields.js), and what the real API server does with its
// Go types that a fake must do too:
//
//  - decoding: a value of the wrong JSON type is refused ("cannot unmarshal
//    string into Go struct field PodSpec.spec.hostNetwork of type bool");
//  - unknown fields: listed ("spec.hostNetwrok"), so the server can refuse them
//    (fieldValidation=Strict, which kubectl sends) or drop them with a warning;
//  - strategic merge patch (what `kubectl apply` and `kubectl patch` send by
//    default): lists with a patch merge key (containers by name, ports by
//    port, ...) merge element by element, other lists are replaced, and the
//    directives $patch, $retainKeys, $setElementOrder/ and
//    $deleteFromPrimitiveList/ are honoured.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dpu::fakes {

class KubeSchema {
 public:
  // The compiled-in tree (kube_fields.json).
  static const KubeSchema& builtin();
  explicit KubeSchema(const nlohmann::json& doc);

  // The type of a kind ("v1", "Pod" -> "IoK8sApiCoreV1Pod"); empty when unknown.
  std::string rootType(const std::string& api_version, const std::string& kind) const;

  struct Findings {
    std::vector<std::string> unknown;  // field paths, "spec.containers[0].imag"
    std::string type_error;            // the first wrongly typed value; empty when none
  };
  // Checks `object` against `type`; with prune, removes the unknown fields.
  Findings check(const std::string& type, nlohmann::json& object, bool prune) const;

  // Applies a strategic merge patch to `target` (an object of `type`).
  Result<void> strategicMerge(const std::string& type, nlohmann::json& target, const nlohmann::json& patch) const;

 private:
  struct Field {
    std::string desc;  // "string" "number" "boolean" "int-or-string" "any" "ref:T" "array:D" "map:D"
  };
  struct Type {
    std::string name;
    std::map<std::string, Field> fields;
  };
  const Type* type(const std::string& name) const;
  void checkValue(const std::string& desc, nlohmann::json& v, const std::string& path, const std::string& owner,
                  bool prune, Findings& out) const;
  Result<void> mergeObject(const std::string& type_name, nlohmann::json& target, const nlohmann::json& patch,
                           const std::string& path) const;
  Result<void> mergeList(const std::string& owner, const std::string& field, const std::string& elem_desc,
                         nlohmann::json& target, const nlohmann::json& patch, const std::string& path) const;

  std::map<std::string, std::string> roots_;
  std::map<std::string, Type> types_;
};

}  // namespace dpu::fakes
