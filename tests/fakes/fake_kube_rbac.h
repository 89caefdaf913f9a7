// RBAC for the fake Kubernetes API server, evaluated as the real authorizer
// does (rbac.authorization.k8s.io/v1): ClusterRoles, Roles, ClusterRoleBindings
// and RoleBindings loaded from the manifests (YAML or JSON, several documents
// per file), subjects as User, Group or ServiceAccount (the user
// system:serviceaccount:NS:NAME in the groups system:serviceaccounts and
// system:serviceaccounts:NS), every authenticated user in system:authenticated,
// system:masters allowed everything, and the discovery endpoints open to the
// authenticated, as the default system:discovery role makes them.
//
// It also keeps the evidence a test needs: every request it refused (a test
// fails on a verb the manifests forgot) and which grant of each loaded role
// allowed something (a grant nothing used is reported: least privilege).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dpu::fakes {

struct KubeUser {
  std::string name;
  std::vector<std::string> groups;
};

// What a request asks to do, in the authorizer's terms.
struct KubeRequestAttributes {
  std::string verb;         // get list watch create update patch delete deletecollection
  std::string api_group;    // "" for the core group
  std::string resource;     // "pods"
  std::string subresource;  // "status"
  std::string ns;           // empty: cluster scope
  std::string name;
  std::string path;         // non-resource requests: the URL path
  bool resource_request = true;
};

// One expanded grant of a loaded role: verb × group × resource (× name).
struct KubeGrant {
  std::string role;  // "ClusterRole/dpu-agent" or "Role/ns/name"
  std::string verb;
  std::string api_group;
  std::string resource;
  std::string resource_name;  // empty: any
  bool used = false;
  std::string describe() const;
};

class KubeRbac {
 public:
  // Adds the RBAC objects of a file; other kinds in it are ignored.
  Result<void> loadFile(const std::string& path);
  Result<void> loadObject(const nlohmann::json& object);
  bool empty() const;

  // Allowed, or the reason as the real server words it.
  Result<void> authorize(const KubeUser& user, const KubeRequestAttributes& a);

  std::vector<std::string> denials() const;
  std::vector<KubeGrant> grants() const;
  // Grants of `role` ("ClusterRole/NAME") nothing used.
  std::vector<KubeGrant> unused(const std::string& role) const;

  // The real server's words for a refusal.
  static std::string forbiddenMessage(const KubeUser& user, const KubeRequestAttributes& a);

 private:
  struct Rule {
    std::vector<std::string> verbs, api_groups, resources, resource_names, non_resource_urls;
  };
  struct Role {
    std::string id;  // "ClusterRole/name" or "Role/ns/name"
    std::vector<Rule> rules;
  };
  struct Subject {
    std::string kind, name, ns;
  };
  struct Binding {
    std::string ns;  // empty: ClusterRoleBinding
    std::string role_kind, role_name;
    std::vector<Subject> subjects;
  };
  bool subjectMatches(const Subject& s, const KubeUser& u, const std::string& binding_ns) const;
  bool ruleAllows(const Rule& r, const KubeRequestAttributes& a) const;
  void markUsed(const Role& role, const KubeRequestAttributes& a);

  mutable std::mutex mu_;
  std::map<std::string, Role> roles_;
  std::vector<Binding> bindings_;
  std::vector<std::string> denials_;
  std::set<std::string> used_;  // KubeGrant identities
};

}  // namespace dpu::fakes
