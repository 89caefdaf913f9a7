// What the fake Kubernetes API server tells a client about the resources it
// serves, in the shapes the real server uses, so kubectl works against it:
//
//  - the resource table (plural, kind, group/version, scope, short names,
//    subresources, the name rule of each kind);
//  - discovery (/api, /apis, /api/v1, /apis/GROUP/VERSION) and OpenAPI v3 (only
//    what kubectl reads: each kind's PATCH path, tagged with its
//    group/version/kind, declaring the fieldValidation parameter, so kubectl
//    leaves field validation to the server instead of downloading schemas);
//  - label selectors (=, ==, !=, in, notin, exists, !exists) and the field
//    selectors each kind supports (a request with another gets 400, as from
//    the real server);
//  - Table responses (meta.k8s.io/v1) with the columns `kubectl get` prints.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dpu::fakes {

enum class KubeResource { kNodes, kPods, kServices, kEndpointSlices, kNetworkPolicies, kNamespaces };
constexpr int kKubeResourceCount = 6;

enum class KubeNameRule { kSubdomain, kLabel, kRfc1035Label };

struct KubeKind {
  KubeResource id;
  const char* plural;
  const char* singular;
  const char* kind;
  const char* list_kind;
  const char* group;  // "" for the core group
  const char* version;
  bool namespaced;
  std::vector<std::string> short_names;
  bool status_subresource;
  KubeNameRule name_rule;

  std::string apiVersion() const;  // "v1", "discovery.k8s.io/v1"
  std::string groupPrefix() const;  // "/api/v1", "/apis/discovery.k8s.io/v1"
};

const KubeKind& kubeKind(KubeResource r);
const std::vector<KubeKind>& kubeKinds();
const KubeKind* kubeKindByPlural(const std::string& group, const std::string& version, const std::string& plural);
const KubeKind* kubeKindByControlName(const std::string& plural);

// An invalid name's reason ("a lowercase RFC 1123 subdomain must consist of
// ..."); empty when valid.
std::string kubeNameProblem(KubeNameRule rule, const std::string& name);

// Discovery documents; `server` is what serverAddressByClientCIDRs names.
nlohmann::json discoveryApiVersions(const std::string& server);
nlohmann::json discoveryGroupList();
nlohmann::json discoveryGroup(const std::string& group);  // null when not served
nlohmann::json discoveryResourceList(const std::string& group, const std::string& version);  // null when not served
nlohmann::json openApiV3Root();
nlohmann::json openApiV3GroupVersion(const std::string& gv_path);  // "api/v1"; null when not served

class LabelSelector {
 public:
  static Result<LabelSelector> parse(const std::string& text);
  bool matches(const nlohmann::json& labels) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    std::string key;
    enum class Op { kEq, kNe, kIn, kNotIn, kExists, kNotExists } op;
    std::vector<std::string> values;
  };
  std::vector<Term> terms_;
};

class FieldSelector {
 public:
  static Result<FieldSelector> parse(const std::string& text, const KubeKind& kind);
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    std::string path;  // "spec.nodeName"
    bool equal;
    std::string value;
  };
  std::vector<Term> terms_;
};

// The value of a dotted path as a field selector sees it ("" when absent).
std::string fieldValue(const nlohmann::json& object, const std::string& path);

// The Table of `items` (stored objects) as `kubectl get` asks for it
// (Accept: application/json;as=Table;g=meta.k8s.io;v=v1); `list_meta` is the
// list's metadata (resourceVersion, continue).
nlohmann::json kubeTable(const KubeKind& kind, const std::vector<nlohmann::json>& items,
                         const nlohmann::json& list_meta, std::chrono::system_clock::time_point now);

// RFC 3339 in UTC, seconds, as Kubernetes writes timestamps.
std::string kubeTimestamp(std::chrono::system_clock::time_point t);

}  // namespace dpu::fakes
