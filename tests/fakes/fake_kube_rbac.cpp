// The fake API server's RBAC authorizer (see fake_kube_rbac.h).
#include "fake_kube_rbac.h"

#include <algorithm>
#include <regex>

#include "common/atomic_file.h"
#include "common/config_doc.h"

namespace dpu::fakes {
namespace {

using nlohmann::json;

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool listAllows(const std::vector<std::string>& v, const std::string& x) { return contains(v, "*") || contains(v, x); }

std::vector<std::string> ruleStrings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& v : j[key])
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string grantId(const std::string& role, const std::string& verb, const std::string& group,
                    const std::string& resource, const std::string& name) {
  return role + "|" + verb + "|" + group + "|" + resource + "|" + name;
}

// What the system:discovery and system:public-info-viewer roles open to every
// authenticated user.
bool discoveryPath(const std::string& p) {
  static const std::regex kOpen(R"(^/(api|apis|openapi)(/.*)?$|^/(version|healthz|livez|readyz)/?$)");
  return std::regex_match(p, kOpen);
}

}  // namespace

std::string KubeGrant::describe() const {
  std::string r = api_group.empty() ? resource : resource + "." + api_group;
  return role + ": " + verb + " " + r + (resource_name.empty() ? "" : " named " + resource_name);
}

Result<void> KubeRbac::loadFile(const std::string& path) {
  auto text = readFile(path);
  if (!text) return Error{"RBAC file " + path + ": " + text.error()};
  // Several YAML documents, separated by lines starting with "---".
  std::vector<std::string> docs(1);
  size_t pos = 0;
  while (pos <= text->size()) {
    size_t nl = text->find('\n', pos);
    std::string line = text->substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (line.rfind("---", 0) == 0)
      docs.emplace_back();
    else
      docs.back() += line + "\n";
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  for (const auto& d : docs) {
    if (d.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    auto doc = parseConfigText(d, path);
    if (!doc) return Error{"RBAC file " + path + ": " + doc.error()};
    if (doc->is_null()) continue;  // a document of comments only
    if (auto r = loadObject(*doc); !r) return Error{"RBAC file " + path + ": " + r.error()};
  }
  return {};
}

Result<void> KubeRbac::loadObject(const json& o) {
  if (!o.is_object()) return {};
  std::string kind = o.value("kind", "");
  if (kind == "List") {
    for (const auto& item : o.value("items", json::array()))
      if (auto r = loadObject(item); !r) return r;
    return {};
  }
  if (o.value("apiVersion", "") != "rbac.authorization.k8s.io/v1") return {};
  const json meta = o.value("metadata", json::object());
  std::string name = meta.value("name", ""), ns = meta.value("namespace", "");
  if (name.empty()) return Error{kind + " without metadata.name"};
  std::lock_guard<std::mutex> lock(mu_);
  if (kind == "ClusterRole" || kind == "Role") {
    if (kind == "Role" && ns.empty()) return Error{"Role " + name + " has no metadata.namespace"};
    Role role;
    role.id = kind == "ClusterRole" ? "ClusterRole/" + name : "Role/" + ns + "/" + name;
    for (const auto& r : o.value("rules", json::array())) {
      Rule rule;
      rule.verbs = ruleStrings(r, "verbs");
      rule.api_groups = ruleStrings(r, "apiGroups");
      rule.resources = ruleStrings(r, "resources");
      rule.resource_names = ruleStrings(r, "resourceNames");
      rule.non_resource_urls = ruleStrings(r, "nonResourceURLs");
      if (rule.verbs.empty()) return Error{role.id + ": a rule without verbs"};
      role.rules.push_back(std::move(rule));
    }
    roles_[role.id] = std::move(role);
    return {};
  }
  if (kind == "ClusterRoleBinding" || kind == "RoleBinding") {
    Binding b;
    b.ns = kind == "RoleBinding" ? ns : "";
    if (kind == "RoleBinding" && ns.empty()) return Error{"RoleBinding " + name + " has no metadata.namespace"};
    const json ref = o.value("roleRef", json::object());
    b.role_kind = ref.value("kind", "");
    b.role_name = ref.value("name", "");
    if (ref.value("apiGroup", "") != "rbac.authorization.k8s.io")
      return Error{kind + " " + name + ": roleRef.apiGroup must be rbac.authorization.k8s.io"};
    if (b.role_kind != "ClusterRole" && !(b.role_kind == "Role" && kind == "RoleBinding"))
      return Error{kind + " " + name + ": roleRef.kind '" + b.role_kind + "' cannot be bound here"};
    for (const auto& s : o.value("subjects", json::array()))
      b.subjects.push_back(Subject{s.value("kind", ""), s.value("name", ""), s.value("namespace", "")});
    bindings_.push_back(std::move(b));
    return {};
  }
  return {};
}

bool KubeRbac::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return roles_.empty() && bindings_.empty();
}

bool KubeRbac::subjectMatches(const Subject& s, const KubeUser& u, const std::string& binding_ns) const {
  if (s.kind == "User") return s.name == u.name;
  if (s.kind == "Group") return s.name == "system:authenticated" || contains(u.groups, s.name);
  if (s.kind == "ServiceAccount") {
    std::string ns = s.ns.empty() ? binding_ns : s.ns;
    return u.name == "system:serviceaccount:" + ns + ":" + s.name;
  }
  return false;
}

bool KubeRbac::ruleAllows(const Rule& r, const KubeRequestAttributes& a) const {
  if (!listAllows(r.verbs, a.verb)) return false;
  if (!a.resource_request) {
    for (const auto& u : r.non_resource_urls) {
      if (u == "*" || u == a.path) return true;
      if (u.size() > 1 && u.back() == '*' && a.path.rfind(u.substr(0, u.size() - 1), 0) == 0) return true;
    }
    return false;
  }
  if (!listAllows(r.api_groups, a.api_group)) return false;
  std::string full = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  bool resource_ok = contains(r.resources, "*") || contains(r.resources, full) ||
                     (!a.subresource.empty() && contains(r.resources, "*/" + a.subresource));
  if (!resource_ok) return false;
  return r.resource_names.empty() || (!a.name.empty() && contains(r.resource_names, a.name));
}

void KubeRbac::markUsed(const Role& role, const KubeRequestAttributes& a) {
  std::string full = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  for (const auto& r : role.rules) {
    if (!ruleAllows(r, a)) continue;
    std::string verb = contains(r.verbs, a.verb) ? a.verb : "*";
    if (!a.resource_request) {
      used_.insert(grantId(role.id, verb, "", a.path, ""));
      continue;
    }
    std::string group = contains(r.api_groups, a.api_group) ? a.api_group : "*";
    std::string res = contains(r.resources, full) ? full : contains(r.resources, "*") ? "*" : "*/" + a.subresource;
    std::string name = r.resource_names.empty() ? "" : a.name;
    used_.insert(grantId(role.id, verb, group, res, name));
  }
}

Result<void> KubeRbac::authorize(const KubeUser& user, const KubeRequestAttributes& a) {
  if (contains(user.groups, "system:masters")) return {};
  if (!a.resource_request && discoveryPath(a.path)) return {};
  std::lock_guard<std::mutex> lock(mu_);
  bool allowed = false;
  for (const auto& b : bindings_) {
    if (!b.ns.empty() && b.ns != a.ns) continue;
    if (!b.ns.empty() && !a.resource_request) continue;
    bool subject = std::any_of(b.subjects.begin(), b.subjects.end(),
                               [&](const Subject& s) { return subjectMatches(s, user, b.ns); });
    if (!subject) continue;
    std::string id = b.role_kind == "ClusterRole" ? "ClusterRole/" + b.role_name : "Role/" + b.ns + "/" + b.role_name;
    auto it = roles_.find(id);
    if (it == roles_.end()) continue;  // a binding to a missing role grants nothing, as in Kubernetes
    for (const auto& r : it->second.rules) {
      if (ruleAllows(r, a)) {
        allowed = true;
        markUsed(it->second, a);
        break;
      }
    }
  }
  if (allowed) return {};
  std::string msg = forbiddenMessage(user, a);
  denials_.push_back(msg);
  return Error{msg, ErrorCode::kForbidden};
}

std::string KubeRbac::forbiddenMessage(const KubeUser& user, const KubeRequestAttributes& a) {
  if (!a.resource_request) return "forbidden: User \"" + user.name + "\" cannot " + a.verb + " path \"" + a.path + "\"";
  std::string qualified = a.api_group.empty() ? a.resource : a.resource + "." + a.api_group;
  std::string full = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  std::string head = a.name.empty() ? qualified + " is forbidden" : qualified + " \"" + a.name + "\" is forbidden";
  std::string scope = a.ns.empty() ? "at the cluster scope" : "in the namespace \"" + a.ns + "\"";
  return head + ": User \"" + user.name + "\" cannot " + a.verb + " resource \"" + full + "\" in API group \"" +
         a.api_group + "\" " + scope;
}

std::vector<std::string> KubeRbac::denials() const {
  std::lock_guard<std::mutex> lock(mu_);
  return denials_;
}

std::vector<KubeGrant> KubeRbac::grants() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KubeGrant> out;
  for (const auto& [id, role] : roles_) {
    for (const auto& r : role.rules) {
      if (!r.non_resource_urls.empty()) {
        for (const auto& v : r.verbs)
          for (const auto& u : r.non_resource_urls) {
            KubeGrant g{id, v, "", u, "", false};
            g.used = used_.count(grantId(id, v, "", u, "")) > 0;
            out.push_back(g);
          }
        continue;
      }
      std::vector<std::string> names = r.resource_names.empty() ? std::vector<std::string>{""} : r.resource_names;
      for (const auto& v : r.verbs)
        for (const auto& g : r.api_groups)
          for (const auto& res : r.resources)
            for (const auto& n : names) {
              KubeGrant grant{id, v, g, res, n, false};
              grant.used = used_.count(grantId(id, v, g, res, n)) > 0;
              out.push_back(grant);
            }
    }
  }
  return out;
}

std::vector<KubeGrant> KubeRbac::unused(const std::string& role) const {
  std::vector<KubeGrant> out;
  for (auto& g : grants())
    if (g.role == role && !g.used) out.push_back(g);
  return out;
}

}  // namespace dpu::fakes
