// kubeconfig and in-cluster configuration for the Kubernetes source.
#include "control/kube_config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <cpprest/asyncrt_utils.h>
#include <nlohmann/json.hpp>

#include "common/config_doc.h"

namespace dpu::control {
namespace {

using nlohmann::json;

Result<std::string> readFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + what + " " + path + ": check that the file exists and is readable"};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

Result<std::string> base64(const std::string& text, const std::string& field) {
  try {
    auto bytes = utility::conversions::from_base64(text);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception&) {
    return Error{field + " is not valid base64"};
  }
}

const json* findNamed(const json& doc, const char* list, const std::string& name) {
  auto it = doc.find(list);
  if (it == doc.end() || !it->is_array()) return nullptr;
  for (const auto& entry : *it)
    if (entry.is_object() && entry.value("name", json()).is_string() && entry["name"].get<std::string>() == name)
      return &entry;
  return nullptr;
}

// Optional string field of `obj`; an Error when present with another type.
Result<std::string> optStr(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Error{where + "." + key + " must be a string"};
  return it->get<std::string>();
}

// "<key>-data" (base64) or "<key>" (a file, relative to the kubeconfig).
Result<std::string> pemField(const json& obj, const std::string& key, const std::string& where,
                             const std::string& base_dir) {
  auto data = optStr(obj, (key + "-data").c_str(), where);
  if (!data.ok()) return std::move(data).takeError();
  if (!data->empty()) return base64(*data, where + "." + key + "-data");
  auto file = optStr(obj, key.c_str(), where);
  if (!file.ok()) return std::move(file).takeError();
  if (file->empty()) return std::string();
  return readFile(resolve(base_dir, *file), where + "." + key);
}

}  // namespace

Result<KubeConnection> parseKubeconfig(std::string_view text, const std::string& base_dir, const std::string& context,
                                       const std::string& origin) {
  auto parsed = parseConfigText(text, origin);
  if (!parsed.ok()) return std::move(parsed).takeError();
  const json& doc = *parsed;
  if (!doc.is_object()) return Error{origin + ": a kubeconfig must be a mapping"};
  std::string ctx_name = context;
  if (ctx_name.empty()) {
    auto cc = optStr(doc, "current-context", origin);
    if (!cc.ok()) return std::move(cc).takeError();
    ctx_name = *cc;
  }
  if (ctx_name.empty()) return Error{origin + ": no current-context is set; set one or name the context to use"};
  const json* ctx = findNamed(doc, "contexts", ctx_name);
  if (ctx == nullptr || !ctx->contains("context") || !(*ctx)["context"].is_object())
    return Error{origin + ": context '" + ctx_name + "' is not in contexts[]"};
  const json& c = (*ctx)["context"];
  std::string where = origin + ": contexts[" + ctx_name + "].context";
  auto cluster_name = optStr(c, "cluster", where);
  auto user_name = optStr(c, "user", where);
  if (!cluster_name.ok()) return std::move(cluster_name).takeError();
  if (!user_name.ok()) return std::move(user_name).takeError();
  const json* cluster = findNamed(doc, "clusters", *cluster_name);
  if (cluster == nullptr || !cluster->contains("cluster") || !(*cluster)["cluster"].is_object())
    return Error{origin + ": cluster '" + *cluster_name + "' of context '" + ctx_name + "' is not in clusters[]"};

  KubeConnection k;
  k.origin = origin + ", context " + ctx_name;
  const json& cl = (*cluster)["cluster"];
  std::string cwhere = origin + ": clusters[" + *cluster_name + "].cluster";
  auto server = optStr(cl, "server", cwhere);
  if (!server.ok()) return std::move(server).takeError();
  if (server->rfind("https://", 0) != 0 && server->rfind("http://", 0) != 0)
    return Error{cwhere + ".server: '" + *server + "' is not an http:// or https:// URL"};
  k.server = *server;
  while (!k.server.empty() && k.server.back() == '/') k.server.pop_back();
  auto ca = pemField(cl, "certificate-authority", cwhere, base_dir);
  if (!ca.ok()) return std::move(ca).takeError();
  k.ca_pem = *ca;
  if (auto it = cl.find("insecure-skip-tls-verify"); it != cl.end() && !it->is_null()) {
    if (!it->is_boolean()) return Error{cwhere + ".insecure-skip-tls-verify must be true or false"};
    k.insecure_skip_tls_verify = it->get<bool>();
  }

  if (!user_name->empty()) {
    const json* user = findNamed(doc, "users", *user_name);
    if (user == nullptr) return Error{origin + ": user '" + *user_name + "' of context '" + ctx_name + "' is not in users[]"};
    const json empty = json::object();
    const json& u = user->contains("user") && (*user)["user"].is_object() ? (*user)["user"] : empty;
    std::string uwhere = origin + ": users[" + *user_name + "].user";
    for (const char* unsupported : {"exec", "auth-provider", "username", "password"})
      if (u.contains(unsupported))
        return Error{uwhere + "." + unsupported + " is not supported; use a token, tokenFile or client certificate"};
    auto token = optStr(u, "token", uwhere);
    auto token_file = optStr(u, "tokenFile", uwhere);
    if (!token.ok()) return std::move(token).takeError();
    if (!token_file.ok()) return std::move(token_file).takeError();
    k.token = *token;
    k.token_file = resolve(base_dir, *token_file);
    auto cert = pemField(u, "client-certificate", uwhere, base_dir);
    if (!cert.ok()) return std::move(cert).takeError();
    auto key = pemField(u, "client-key", uwhere, base_dir);
    if (!key.ok()) return std::move(key).takeError();
    k.client_cert_pem = *cert;
    k.client_key_pem = *key;
    if (k.client_cert_pem.empty() != k.client_key_pem.empty())
      return Error{uwhere + ": client-certificate and client-key go together; give both or neither"};
  }
  return k;
}

Result<KubeConnection> loadKubeconfig(const std::string& path, const std::string& context) {
  auto text = readFile(path, "kubeconfig");
  if (!text.ok()) return std::move(text).takeError();
  std::string dir;
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = path.substr(0, slash);
  return parseKubeconfig(*text, dir.empty() ? "." : dir, context, "kubeconfig " + path);
}

Result<KubeConnection> loadInClusterConfig(const std::string& dir, const std::string& server_override) {
  KubeConnection k;
  k.origin = "in-cluster config " + dir;
  if (!server_override.empty()) {
    k.server = server_override;
  } else {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0')
      return Error{"in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set; run inside a "
                   "pod or configure a kubeconfig"};
    std::string h = host;
    if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6 service address
    k.server = "https://" + h + ":" + port;
  }
  k.token_file = dir + "/token";
  struct stat st {};
  if (::stat(k.token_file.c_str(), &st) != 0)
    return Error{"in-cluster config: " + k.token_file + " does not exist; is the service account token mounted?"};
  auto ca = readFile(dir + "/ca.crt", "in-cluster CA");
  if (!ca.ok()) return std::move(ca).takeError();
  k.ca_pem = *ca;
  if (auto ns = readFile(dir + "/namespace", "namespace"); ns.ok()) {
    k.ns = *ns;
    while (!k.ns.empty() && (k.ns.back() == '\n' || k.ns.back() == ' ')) k.ns.pop_back();
  }
  return k;
}

KubeTokenSource::KubeTokenSource(const KubeConnection& connection, std::chrono::seconds reread_every)
    : static_token_(connection.token), file_(connection.token_file), reread_every_(reread_every) {}

std::string KubeTokenSource::token(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_.empty()) return static_token_;
  struct stat st {};
  auto now = std::chrono::steady_clock::now();
  bool changed = ::stat(file_.c_str(), &st) == 0 &&
                 (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec);
  if (have_ && !changed && now - read_at_ < reread_every_) return cached_;
  auto text = readFile(file_, "service-account token");
  if (!text.ok()) {
    if (error != nullptr) *error = text.error();
    return cached_.empty() ? static_token_ : cached_;
  }
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  cached_ = t;
  mtime_ = st.st_mtim;
  read_at_ = now;
  have_ = true;
  return cached_;
}

void KubeTokenSource::invalidate() {
  std::lock_guard<std::mutex> lock(mutex_);
  have_ = false;
}

}  // namespace dpu::control
