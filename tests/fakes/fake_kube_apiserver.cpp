// The fake Kubernetes API server: a small HTTP/1.1 server (one thread per
// connection, OpenSSL for TLS) over an in-memory object store with a global
// resourceVersion and an event history, the REST semantics of the real server
// for the kinds it stores, and (with `controllers`) the few controllers a lab
// needs. See fake_kube_apiserver.h.
#include "fake_kube_apiserver.h"
#include "fake_kube_protobuf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <regex>
#include <sstream>
#include <set>

#include "common/config_doc.h"
#include "common/net_address.h"
#include "fake_kube_schema.h"
#include "fake_kube_services.h"

namespace dpu::fakes {
namespace {

using nlohmann::json;

const KubeKind& info(KubeResource r) { return kubeKind(r); }

std::string key(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

// "pods", "endpointslices.discovery.k8s.io": how the real server names a resource in messages.
std::string qualified(const KubeKind& k) {
  return std::string(k.group).empty() ? k.plural : std::string(k.plural) + "." + k.group;
}

std::string statusJson(int code, const std::string& reason, const std::string& message,
                       const json& details = nullptr) {
  json j = {{"kind", "Status"},   {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Failure"},
            {"message", message}, {"reason", reason},  {"code", code}};
  if (!details.is_null()) j["details"] = details;
  return j.dump();
}

std::string percentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

const char* reasonPhrase(int code) {
  switch (code) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 500: return "Internal Server Error";
    default: return "Error";
  }
}

std::string nowStamp() { return kubeTimestamp(std::chrono::system_clock::now()); }

bool wantsTable(const std::string& accept) {
  return accept.find("as=Table") != std::string::npos;
}

// Label keys and values as the real server checks them.
std::string labelProblem(const std::string& k, const std::string& v) {
  static const std::regex kName("^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$");
  std::string name = k, prefix;
  if (auto slash = k.find('/'); slash != std::string::npos) {
    prefix = k.substr(0, slash);
    name = k.substr(slash + 1);
    if (!kubeNameProblem(KubeNameRule::kSubdomain, prefix).empty())
      return "metadata.labels: Invalid value: \"" + k + "\": prefix part " + kubeNameProblem(KubeNameRule::kSubdomain, prefix);
  }
  if (name.empty() || name.size() > 63 || !std::regex_match(name, kName))
    return "metadata.labels: Invalid value: \"" + k +
           "\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
           "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
           "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
  if (!v.empty() && (v.size() > 63 || !std::regex_match(v, kName)))
    return "metadata.labels: Invalid value: \"" + v +
           "\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
           "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
           "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
  return "";
}

using Invalid = std::function<void(const std::string&, const std::string&)>;

// An object refused as the real server's validation refuses it (422 Invalid,
// a cause per field); the details ride on the message, a JSON suffix after a
// newline that the handler splits off.
Error invalidObject(const KubeKind& k, const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& causes) {
  json details = {{"name", name}, {"group", k.group}, {"kind", k.kind}, {"causes", json::array()}};
  std::string msg = std::string(k.kind) + " \"" + name + "\" is invalid: ";
  for (size_t i = 0; i < causes.size(); ++i) {
    msg += (i ? ", " : "") + causes[i].first + ": " + causes[i].second;
    details["causes"].push_back(
        {{"reason", "FieldValueInvalid"}, {"message", causes[i].second}, {"field", causes[i].first}});
  }
  return Error{msg + "\n" + details.dump(), ErrorCode::kInvalid};
}

// IntOrString naming a port, as ValidatePortNumOrName checks it.
void portOrName(const std::string& field, const json& v, const Invalid& invalid) {
  if (v.is_number_integer()) {
    int64_t n = v.get<int64_t>();
    if (n < 1 || n > 65535) invalid(field, "Invalid value: " + std::to_string(n) + ": must be between 1 and 65535, inclusive");
    return;
  }
  std::string name = v.is_string() ? v.get<std::string>() : "";
  static const std::regex kName("^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$");
  bool letter = std::any_of(name.begin(), name.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  if (!std::regex_match(name, kName) || !letter || name.find("--") != std::string::npos)
    invalid(field, "Invalid value: \"" + name + "\": must contain at least one letter (a-z), consist of lower case "
                   "alphanumeric characters or '-', be no more than 15 characters");
}

void validateSelector(const std::string& field, const json& sel, const Invalid& invalid) {
  auto exprs = sel.value("matchExpressions", json::array());
  for (size_t i = 0; i < exprs.size(); ++i) {
    std::string f = field + ".matchExpressions[" + std::to_string(i) + "]";
    std::string op = exprs[i].value("operator", "");
    size_t values = exprs[i].value("values", json::array()).size();
    if (op == "In" || op == "NotIn") {
      if (values == 0) invalid(f + ".values", "Required value: must be specified when `operator` is 'In' or 'NotIn'");
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (values > 0) invalid(f + ".values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
    } else {
      invalid(f + ".operator", "Invalid value: \"" + op + "\": not a valid selector operator");
    }
  }
}

void validatePolicyPort(const std::string& field, const json& port, const Invalid& invalid) {
  std::string proto = port.value("protocol", "TCP");
  if (proto != "TCP" && proto != "UDP" && proto != "SCTP")
    invalid(field + ".protocol", "Unsupported value: \"" + proto + "\": supported values: \"SCTP\", \"TCP\", \"UDP\"");
  if (port.contains("port")) portOrName(field + ".port", port["port"], invalid);
  if (!port.contains("endPort")) return;
  int64_t end = port.value("endPort", int64_t{0});
  if (!port.contains("port"))
    invalid(field + ".endPort", "Required value: may not be specified when `port` is not specified");
  else if (!port["port"].is_number_integer())
    invalid(field + ".endPort", "Forbidden: may not be specified when `port` is non-numeric");
  else if (end < port["port"].get<int64_t>())
    invalid(field + ".endPort", "Invalid value: " + std::to_string(end) + ": must be greater than or equal to `port`");
  else if (end > 65535)
    invalid(field + ".endPort", "Invalid value: " + std::to_string(end) + ": must be between 1 and 65535, inclusive");
}

void validatePeer(const std::string& field, const json& peer, const Invalid& invalid) {
  int n = 0;
  for (const char* k : {"podSelector", "namespaceSelector", "ipBlock"}) n += peer.contains(k) ? 1 : 0;
  if (n == 0) invalid(field, "Required value: must specify a peer");
  if (peer.contains("ipBlock") && n > 1) invalid(field, "Forbidden: may not specify more than 1 peer");
  for (const char* k : {"podSelector", "namespaceSelector"})
    if (peer.contains(k)) validateSelector(field + "." + k, peer[k], invalid);
  if (!peer.contains("ipBlock")) return;
  const json& block = peer["ipBlock"];
  std::string cidr = block.value("cidr", "");
  auto net = IpPrefix::parse(cidr, true);
  if (!net) {
    invalid(field + ".ipBlock.cidr", "Invalid value: \"" + cidr + "\": must be a valid CIDR value");
    return;
  }
  auto excepts = block.value("except", json::array());
  for (size_t i = 0; i < excepts.size(); ++i) {
    std::string text = excepts[i].is_string() ? excepts[i].get<std::string>() : "";
    auto ex = IpPrefix::parse(text, true);
    if (!ex || !net->contains(ex->address) || ex->length <= net->length)
      invalid(field + ".ipBlock.except[" + std::to_string(i) + "]",
              "Invalid value: \"" + text + "\": must be a strict subset of `cidr`");
  }
}

bool tolerates(const json& tolerations, const json& taint) {
  for (const auto& t : tolerations) {
    std::string effect = t.value("effect", ""), key = t.value("key", ""), op = t.value("operator", "Equal");
    if (!effect.empty() && effect != taint.value("effect", "")) continue;
    if (key.empty() && op == "Exists") return true;
    if (key != taint.value("key", "")) continue;
    if (op == "Exists" || t.value("value", "") == taint.value("value", "")) return true;
  }
  return false;
}

bool requirementHolds(const json& labels, const json& req) {
  std::string k = req.value("key", ""), op = req.value("operator", "");
  bool has = labels.is_object() && labels.contains(k);
  std::string v = has && labels[k].is_string() ? labels[k].get<std::string>() : "";
  auto values = req.value("values", json::array());
  bool in = has && std::find(values.begin(), values.end(), v) != values.end();
  if (op == "In") return in;
  if (op == "NotIn") return !in;
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  return false;
}

// nodeSelector and requiredDuringSchedulingIgnoredDuringExecution of a pod against a node's labels.
bool nodeFits(const json& pod, const json& node) {
  json labels = node.value("/metadata/labels"_json_pointer, json::object());
  const json node_selector = pod.value("/spec/nodeSelector"_json_pointer, json::object());
  for (const auto& [k, v] : node_selector.items())
    if (!labels.contains(k) || labels[k] != v) return false;
  auto terms = pod.value("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"_json_pointer,
                         json::array());
  if (!terms.empty()) {
    bool any = false;
    for (const auto& term : terms) {
      bool all = true;
      for (const auto& req : term.value("matchExpressions", json::array())) all = all && requirementHolds(labels, req);
      any = any || all;
    }
    if (!any) return false;
  }
  json tolerations = pod.value("/spec/tolerations"_json_pointer, json::array());
  for (const auto& taint : node.value("/spec/taints"_json_pointer, json::array())) {
    std::string effect = taint.value("effect", "");
    if ((effect == "NoSchedule" || effect == "NoExecute") && !tolerates(tolerations, taint)) return false;
  }
  return true;
}

bool selectorMatches(const json& selector, const json& labels) {
  if (!selector.is_object() || selector.empty()) return false;
  for (const auto& [k, v] : selector.items())
    if (!labels.is_object() || !labels.contains(k) || labels[k] != v) return false;
  return true;
}

}  // namespace

struct FakeKubeApiServer::Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  std::atomic<bool> done{false};

  ssize_t read(char* buf, size_t n) {
    if (ssl != nullptr) {
      int r = SSL_read(ssl, buf, static_cast<int>(n));
      return r > 0 ? r : -1;
    }
    ssize_t r;
    do {
      r = ::recv(fd, buf, n, 0);
    } while (r < 0 && errno == EINTR);
    return r > 0 ? r : -1;
  }
  bool write(const char* buf, size_t n) {
    while (n > 0) {
      ssize_t w;
      if (ssl != nullptr) {
        int r = SSL_write(ssl, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        w = r > 0 ? r : -1;
      } else {
        w = ::send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
      }
      if (w <= 0) return false;
      buf += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool write(const std::string& s) { return write(s.data(), s.size()); }
  bool chunk(const std::string& s) {
    if (s.empty()) return true;
    char head[32];
    int n = snprintf(head, sizeof head, "%zx\r\n", s.size());
    std::string out;
    out.reserve(s.size() + 40);
    out.append(head, static_cast<size_t>(n));
    out += s;
    out += "\r\n";
    return write(out);
  }
  // Closes without a TLS close_notify or a final chunk: a dropped connection.
  void abort() { ::shutdown(fd, SHUT_RDWR); }
};

struct FakeKubeApiServer::Request {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string param(const std::string& k) const {
    auto it = query.find(k);
    return it == query.end() ? std::string() : it->second;
  }
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A request for a resource, as its path names it.
struct FakeKubeApiServer::Route {
  const KubeKind* kind = nullptr;
  std::string ns;    // namespaced kinds: the namespace of the path (empty: all namespaces)
  std::string name;  // empty: the collection
  std::string sub;   // "status"
  bool collection() const { return name.empty(); }
  std::string storeKey() const { return kind->namespaced ? key(ns, name) : name; }
  std::string what() const { return qualified(*kind) + " \"" + name + "\""; }
};

struct FakeKubeApiServer::Reply {
  int code = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::string> warnings;
};

namespace {

bool respond(int code, const std::string& body, const std::string& content_type,
             const std::function<bool(const std::string&)>& write, const std::vector<std::string>& warnings = {}) {
  std::string head = "HTTP/1.1 " + std::to_string(code) + " " + reasonPhrase(code) + "\r\nContent-Type: " +
                     content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& w : warnings) {
    std::string text;  // RFC 7234 quoted-string
    for (char c : w) {
      if (c == '"' || c == '\\') text += '\\';
      text += c;
    }
    head += "Warning: 299 - \"" + text + "\"\r\n";
  }
  return write(head + "\r\n" + body);
}

std::optional<std::string> parseRoute(const std::string& path, const KubeKind*& kind, std::string& ns, std::string& name,
                                      std::string& sub) {
  std::vector<std::string> seg;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    seg.push_back(path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (!seg.empty() && seg.back().empty()) seg.pop_back();
  std::string group, version;
  size_t i;
  if (seg.size() >= 2 && seg[0] == "api") {
    version = seg[1];
    i = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    group = seg[1];
    version = seg[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  std::vector<std::string> rest(seg.begin() + static_cast<long>(i), seg.end());
  if (rest.empty()) return std::nullopt;
  if (rest[0] == "namespaces" && rest.size() >= 3) {
    const KubeKind* k = kubeKindByPlural(group, version, rest[2]);
    if (k != nullptr && k->namespaced) {
      kind = k;
      ns = rest[1];
      if (rest.size() >= 4) name = rest[3];
      if (rest.size() >= 5) sub = rest[4];
      if (rest.size() > 5) return std::nullopt;
      return "";
    }
  }
  const KubeKind* k = kubeKindByPlural(group, version, rest[0]);
  if (k == nullptr) return std::nullopt;
  kind = k;
  if (k->namespaced) {
    if (rest.size() != 1) return std::nullopt;  // all namespaces: the collection only
    return "";
  }
  if (rest.size() >= 2) name = rest[1];
  if (rest.size() >= 3) sub = rest[2];
  if (rest.size() > 3) return std::nullopt;
  return "";
}

// What the real server's request-info resolver makes of a path under
// /api/VERSION/ or /apis/GROUP/VERSION/ that names a resource: a resource
// request, authorized as such before the server looks whether it serves
// that resource (a Secret the caller may not read is 403, not 404). nullopt:
// a non-resource path (discovery, /version, /healthz, ...).
std::optional<KubeRequestAttributes> resourceAttributes(const std::string& path, const std::string& method, bool watch) {
  std::vector<std::string> seg;
  std::stringstream in(path);
  for (std::string s; std::getline(in, s, '/');)
    if (!s.empty()) seg.push_back(s);
  KubeRequestAttributes a;
  size_t i;
  if (seg.size() >= 3 && seg[0] == "api") {
    i = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    a.api_group = seg[1];
    i = 3;
  } else {
    return std::nullopt;
  }
  std::vector<std::string> rest(seg.begin() + static_cast<long>(i), seg.end());
  if (rest[0] == "namespaces" && rest.size() >= 3) {
    a.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  a.resource = rest[0];
  if (rest.size() >= 2) a.name = rest[1];
  if (rest.size() >= 3) a.subresource = rest[2];
  if (a.resource == "namespaces" && !a.name.empty()) a.ns = a.name;
  if (method == "GET") a.verb = a.name.empty() ? (watch ? "watch" : "list") : "get";
  else if (method == "POST") a.verb = "create";
  else if (method == "PUT") a.verb = "update";
  else if (method == "PATCH") a.verb = "patch";
  else if (method == "DELETE") a.verb = a.name.empty() ? "deletecollection" : "delete";
  else a.verb = "get";
  return a;
}

}  // namespace

FakeKubeApiServer::FakeKubeApiServer() = default;
FakeKubeApiServer::~FakeKubeApiServer() { stop(); }

std::string FakeKubeApiServer::url() const {
  return std::string(ssl_ctx_ != nullptr ? "https://" : "http://") + options_.bind + ":" + std::to_string(port_);
}

Result<void> FakeKubeApiServer::start(const FakeKubeApiServerOptions& options) {
  options_ = options;
  token_ = options.token;
  for (const auto& f : options.rbac_files) {
    if (auto r = rbac_.loadFile(f); !r) return Error{"fake API server: " + r.error()};
  }
  rbac_on_ = !options.rbac_files.empty();
  auto cidrs = ServiceCidrs::parse(options.service_cidr);
  if (!cidrs) return Error{"fake API server: " + cidrs.error()};
  service_cidrs_ = std::move(*cidrs);
  // A client that goes away mid-write must not kill the test process.
  ::signal(SIGPIPE, SIG_IGN);
  if (!options.cert_file.empty()) {
    ssl_ctx_ = SSL_CTX_new(TLS_server_method());
    if (ssl_ctx_ == nullptr || SSL_CTX_use_certificate_chain_file(ssl_ctx_, options.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ssl_ctx_, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return Error{"fake API server: cannot load " + options.cert_file + " / " + options.key_file};
    }
    SSL_CTX_set_mode(ssl_ctx_, SSL_MODE_AUTO_RETRY);
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options.port);
  if (::inet_pton(AF_INET, options.bind.c_str(), &addr.sin_addr) != 1)
    return Error{"fake API server: bind address " + options.bind + " is not IPv4"};
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0) {
    std::string e = strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return Error{"fake API server: cannot listen on " + options.bind + ":" + std::to_string(options.port) + ": " + e};
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  stopping_ = false;
  if (options.controllers) {
    std::lock_guard<std::mutex> lock(mu_);
    bootstrapLocked();
  }
  accept_thread_ = std::thread([this] { acceptLoop(); });
  if (options.controllers) controller_thread_ = std::thread([this] { controllerLoop(); });
  return {};
}

void FakeKubeApiServer::stop() {
  if (listen_fd_ < 0) return;
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  if (controller_thread_.joinable()) controller_thread_.join();
  std::list<std::pair<std::shared_ptr<Conn>, std::thread>> conns;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& c : conns_) c.first->abort();
    conns.swap(conns_);
  }
  for (auto& c : conns) c.second.join();
  if (ssl_ctx_ != nullptr) {
    SSL_CTX_free(ssl_ctx_);
    ssl_ctx_ = nullptr;
  }
}

void FakeKubeApiServer::acceptLoop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto conn = std::make_shared<Conn>();
    conn->fd = fd;
    std::lock_guard<std::mutex> lock(conns_mu_);
    // Reap finished connections so a long run does not pile up threads.
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->first->done) {
        it->second.join();
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    if (stopping_) {
      ::close(fd);
      return;
    }
    conns_.emplace_back(conn, std::thread([this, conn] { serve(conn); }));
  }
}

void FakeKubeApiServer::serve(std::shared_ptr<Conn> conn) {
  if (ssl_ctx_ != nullptr) {
    conn->ssl = SSL_new(ssl_ctx_);
    SSL_set_fd(conn->ssl, conn->fd);
    if (SSL_accept(conn->ssl) != 1) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.tls_handshake_failures++;
      }
      SSL_free(conn->ssl);
      conn->ssl = nullptr;
      ::close(conn->fd);
      conn->done = true;
      return;
    }
  }
  std::string in;
  char buf[16384];
  bool keep = true;
  while (keep && !stopping_) {
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (in.size() > 65536) {
        keep = false;
        break;
      }
      ssize_t n = conn->read(buf, sizeof buf);
      if (n <= 0) {
        keep = false;
        break;
      }
      in.append(buf, static_cast<size_t>(n));
    }
    if (!keep) break;
    Request req;
    std::string head = in.substr(0, header_end);
    in.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' '), sp2 = request_line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) break;
    req.method = request_line.substr(0, sp1);
    std::string target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t q = target.find('?');
    req.path = percentDecode(target.substr(0, q));
    if (q != std::string::npos) {
      std::string qs = target.substr(q + 1);
      size_t pos = 0;
      while (pos <= qs.size()) {
        size_t amp = qs.find('&', pos);
        std::string kv = qs.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
        size_t eq = kv.find('=');
        if (!kv.empty())
          req.query[percentDecode(kv.substr(0, eq))] = eq == std::string::npos ? "" : percentDecode(kv.substr(eq + 1));
        if (amp == std::string::npos) break;
        pos = amp + 1;
      }
    }
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        size_t v = line.find_first_not_of(' ', colon + 1);
        req.headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = e + 2;
    }
    size_t length = 0;
    if (auto cl = req.header("content-length"); !cl.empty()) length = std::stoul(cl);
    if (length > (64u << 20)) break;
    while (in.size() < length) {
      ssize_t n = conn->read(buf, sizeof buf);
      if (n <= 0) {
        keep = false;
        break;
      }
      in.append(buf, static_cast<size_t>(n));
    }
    if (!keep) break;
    req.body = in.substr(0, length);
    in.erase(0, length);
    keep = handle(*conn, req);
    if (req.header("connection") == "close") keep = false;
  }
  if (conn->ssl != nullptr) {
    SSL_free(conn->ssl);
    conn->ssl = nullptr;
  }
  ::close(conn->fd);
  conn->done = true;
}

FakeKubeApiServer::Reply FakeKubeApiServer::nonResource(const Request& req, bool& handled) {
  handled = true;
  const std::string& p = req.path;
  auto ok = [](const json& j) { return Reply{200, j.dump(), "application/json", {}}; };
  if (p == "/api" || p == "/api/") return ok(discoveryApiVersions(options_.bind + ":" + std::to_string(port_)));
  if (p == "/apis" || p == "/apis/") return ok(discoveryGroupList());
  if (p == "/version" || p == "/version/") {
    std::smatch m;
    std::string major = "1", minor = "32";
    static const std::regex kVer(R"(^v([0-9]+)\.([0-9]+))");
    if (std::regex_search(options_.git_version, m, kVer)) {
      major = m[1];
      minor = m[2];
    }
    return ok({{"major", major},
               {"minor", minor},
               {"gitVersion", options_.git_version},
               {"gitCommit", "0000000000000000000000000000000000000000"},
               {"gitTreeState", "clean"},
               {"buildDate", "2026-01-01T00:00:00Z"},
               {"goVersion", "go1.23"},
               {"compiler", "gc"},
               {"platform", "linux/amd64"}});
  }
  if (p == "/healthz" || p == "/livez" || p == "/readyz") return Reply{200, "ok", "text/plain", {}};
  if (p == "/openapi/v3" || p == "/openapi/v3/") return ok(openApiV3Root());
  if (p.rfind("/openapi/v3/", 0) == 0) {
    json doc = openApiV3GroupVersion(p.substr(strlen("/openapi/v3/")));
    if (!doc.is_null()) return ok(doc);
  }
  static const std::regex kGroup(R"(^/apis/([^/]+)/?$)"), kGroupVersion(R"(^/apis/([^/]+)/([^/]+)/?$)");
  std::smatch m;
  if (p == "/api/v1" || p == "/api/v1/") return ok(discoveryResourceList("", "v1"));
  if (std::regex_match(p, m, kGroup)) {
    json g = discoveryGroup(m[1]);
    if (!g.is_null()) return ok(g);
  }
  if (std::regex_match(p, m, kGroupVersion)) {
    json l = discoveryResourceList(m[1], m[2]);
    if (!l.is_null()) return ok(l);
  }
  handled = false;
  return Reply{};
}

bool FakeKubeApiServer::handle(Conn& conn, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  auto status = [&](int code, const std::string& reason, const std::string& message, const json& details = nullptr) {
    return respond(code, statusJson(code, reason, message, details), "application/json", write);
  };
  if (req.path.rfind("/fake/", 0) == 0) return handleControl(conn, req);
  std::optional<KubeUser> user;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string auth = req.header("authorization");
    if (token_.empty() && options_.tokens.empty()) {
      user = options_.user;
    } else if (!token_.empty() && auth == "Bearer " + token_) {
      user = options_.user;
    } else {
      for (const auto& t : options_.tokens)
        if (auth == "Bearer " + t.token) user = t.user;
    }
    if (!user) stats_.unauthorized++;
  }
  if (!user) return status(401, "Unauthorized", "Unauthorized");

  KubeRequestAttributes attrs;
  Route route;
  auto parsed = parseRoute(req.path, route.kind, route.ns, route.name, route.sub);
  // A resource the fake does not serve (Secrets, /namespaces/X/secrets that
  // parses as a subresource of a Namespace): RBAC first, as the real server does.
  auto unserved = [&](const KubeRequestAttributes& a) {
    if (rbac_on_) {
      if (auto r = rbac_.authorize(*user, a); !r) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          stats_.forbidden++;
        }
        return status(403, "Forbidden", r.error());
      }
    }
    return status(404, "NotFound", "the server could not find the requested resource");
  };
  if (!parsed) {
    if (auto a = resourceAttributes(req.path, req.method, req.param("watch") == "true")) return unserved(*a);
    attrs.resource_request = false;
    attrs.path = req.path;
    attrs.verb = req.method == "GET" ? "get" : req.method == "POST" ? "post" : req.method == "PUT" ? "put"
               : req.method == "DELETE" ? "delete" : req.method == "PATCH" ? "patch" : "head";
    if (rbac_on_) {
      if (auto r = rbac_.authorize(*user, attrs); !r) {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.forbidden++;
        return status(403, "Forbidden", r.error());
      }
    }
    bool handled = false;
    Reply reply = nonResource(req, handled);
    if (handled && req.method == "GET") return respond(reply.code, reply.body, reply.content_type, write);
    return status(404, "NotFound", "the server could not find the requested resource");
  }
  if (route.kind->id == KubeResource::kNamespaces && !route.name.empty()) route.ns = route.name;
  if (!route.sub.empty() && (route.sub != "status" || !route.kind->status_subresource)) {
    if (auto a = resourceAttributes(req.path, req.method, req.param("watch") == "true")) return unserved(*a);
    return status(404, "NotFound", "the server could not find the requested resource");
  }

  bool watch = req.param("watch") == "true" || req.param("watch") == "1";
  attrs.api_group = route.kind->group;
  attrs.resource = route.kind->plural;
  attrs.subresource = route.sub;
  attrs.ns = route.kind->namespaced || route.kind->id == KubeResource::kNamespaces ? route.ns : "";
  attrs.name = route.name;
  if (req.method == "GET") attrs.verb = route.collection() ? (watch ? "watch" : "list") : "get";
  else if (req.method == "POST") attrs.verb = "create";
  else if (req.method == "PUT") attrs.verb = "update";
  else if (req.method == "PATCH") attrs.verb = "patch";
  else if (req.method == "DELETE") attrs.verb = route.collection() ? "deletecollection" : "delete";
  else return status(405, "MethodNotAllowed", req.method + " is not supported");
  // A list or watch with fieldSelector=metadata.name=X is authorized as for X.
  if (route.collection()) {
    std::string fs = req.param("fieldSelector");
    static const std::regex kByName(R"(^metadata\.name==?([^,]+)$)");
    std::smatch m;
    if (std::regex_match(fs, m, kByName)) attrs.name = m[1];
  }
  if (rbac_on_) {
    if (auto r = rbac_.authorize(*user, attrs); !r) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.forbidden++;
      }
      json details = {{"kind", route.kind->plural}};
      if (!route.name.empty()) details["name"] = route.name;
      if (std::string(route.kind->group).size()) details["group"] = route.kind->group;
      return status(403, "Forbidden", r.error(), details);
    }
  }

  if (int code = failing_[static_cast<int>(route.kind->id)].load(); code != 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.injected_failures++;
    }
    return status(code, code == 503 ? "ServiceUnavailable" : "InternalError",
                  std::string("the server is currently unable to handle the request (") + route.kind->plural +
                      " are failed on purpose)");
  }

  if (!watch) {
    std::unique_lock<std::mutex> lock(mu_);
    const int kind = static_cast<int>(route.kind->id);
    if (FakeKubeHang how = hanging_[kind]; how != FakeKubeHang::kNone) {
      stats_.hung_requests++;
      if (how == FakeKubeHang::kStalledBody) {
        // A length the body never reaches: the client waits for the rest.
        const std::string start = std::string("{\"kind\":\"") + route.kind->list_kind + "\",\"apiVersion\":\"" +
                                  route.kind->apiVersion() + "\",\"metadata\":{\"resourceVersion\":\"" +
                                  std::to_string(rv_) + "\"},\"items\":[";
        lock.unlock();
        const bool sent = conn.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n" +
                                     start);
        lock.lock();
        if (!sent) return false;
      }
      cv_.wait(lock, [&] { return stopping_ || hanging_[kind] == FakeKubeHang::kNone; });
      return false;  // closed unanswered
    }
  }
  if (req.method == "GET" && route.collection())
    return watch ? handleWatch(conn, route, req) : handleList(conn, route, req);
  Reply reply;
  if (req.method == "GET") {
    reply = handleGet(route, req);
  } else if (req.method == "POST") {
    if (!route.collection() || !route.sub.empty())
      return status(405, "MethodNotAllowed", "POST is not supported on " + req.path);
    reply = handleCreate(route, req);
  } else if (req.method == "PUT" || req.method == "PATCH") {
    if (route.collection()) return status(405, "MethodNotAllowed", req.method + " needs an object's path");
    reply = handleUpdate(route, req, req.method == "PATCH");
  } else {
    reply = route.collection() ? handleDeleteCollection(route, req) : handleDelete(route, req);
  }
  return respond(reply.code, reply.body, reply.content_type, write, reply.warnings);
}

FakeKubeApiServer::Reply FakeKubeApiServer::handleGet(const Route& route, const Request& req) {
  std::lock_guard<std::mutex> lock(mu_);
  const KubeKind& k = *route.kind;
  auto& store = objects_[static_cast<int>(k.id)];
  auto it = store.find(route.storeKey());
  if (it == store.end())
    return Reply{404,
                 statusJson(404, "NotFound", route.what() + " not found",
                            {{"name", route.name}, {"kind", k.plural}, {"group", k.group}}),
                 "application/json",
                 {}};
  if (wantsTable(req.header("accept"))) {
    json obj = json::parse(it->second->json, nullptr, false);
    if (!obj.is_discarded())
      return Reply{200, kubeTable(k, {obj}, {{"resourceVersion", std::to_string(it->second->rv)}},
                                  std::chrono::system_clock::now())
                            .dump(),
                   "application/json", {}};
  }
  return Reply{200, it->second->json, "application/json", {}};
}

bool FakeKubeApiServer::handleList(Conn& conn, const Route& route, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  const KubeKind& ri = *route.kind;
  auto labels = LabelSelector::parse(req.param("labelSelector"));
  if (!labels) return respond(400, statusJson(400, "BadRequest", labels.error()), "application/json", write);
  auto fields = FieldSelector::parse(req.param("fieldSelector"), ri);
  if (!fields) return respond(400, statusJson(400, "BadRequest", fields.error()), "application/json", write);
  size_t limit = 0;
  if (auto l = req.param("limit"); !l.empty()) limit = std::stoul(l);
  std::string cont = req.param("continue");
  std::shared_ptr<Snapshot> snap;
  size_t offset = 0;
  uint64_t id = 0;
  bool filtered = !labels->empty() || !fields->empty();
  std::string prefix = ri.namespaced && !route.ns.empty() ? route.ns + "/" : "";
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.lists++;
    if (cont.empty()) {
      snap = std::make_shared<Snapshot>();
      snap->rv = rv_;
      const auto& store = objects_[static_cast<int>(ri.id)];
      snap->items.reserve(prefix.empty() && !filtered ? store.size() : 16);
      auto begin = prefix.empty() ? store.begin() : store.lower_bound(prefix);
      for (auto it = begin; it != store.end(); ++it) {
        if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
        if (filtered) {
          json o = json::parse(it->second->json, nullptr, false);
          if (o.is_discarded()) continue;
          if (!labels->matches(o.value("/metadata/labels"_json_pointer, json::object())) || !fields->matches(o)) continue;
        }
        snap->items.push_back(it->second);
      }
      if (limit != 0 && snap->items.size() > limit) {
        id = next_snapshot_++;
        snapshots_[id] = snap;
        while (snapshots_.size() > 16) snapshots_.erase(snapshots_.begin());
      }
    } else {
      size_t colon = cont.find(':');
      if (colon != std::string::npos) {
        id = std::strtoull(cont.c_str(), nullptr, 10);
        offset = std::strtoull(cont.c_str() + colon + 1, nullptr, 10);
        auto it = snapshots_.find(id);
        if (it != snapshots_.end()) snap = it->second;
      }
    }
  }
  if (!snap)
    return respond(410, statusJson(410, "Expired", "The provided continue parameter is too old to display a "
                                                   "consistent list result. You can start a new list without the "
                                                   "continue parameter."),
                   "application/json", write);
  size_t end = limit == 0 ? snap->items.size() : std::min(snap->items.size(), offset + limit);
  std::string next;
  if (end < snap->items.size()) {
    next = std::to_string(id) + ":" + std::to_string(end);
  } else if (id != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_.erase(id);
  }
  if (wantsTable(req.header("accept"))) {
    std::vector<json> items;
    for (size_t i = offset; i < end; ++i) {
      json o = json::parse(snap->items[i]->json, nullptr, false);
      if (!o.is_discarded()) items.push_back(std::move(o));
    }
    json meta = {{"resourceVersion", std::to_string(snap->rv)}};
    if (!next.empty()) meta["continue"] = next;
    return respond(200, kubeTable(ri, items, meta, std::chrono::system_clock::now()).dump(), "application/json", write);
  }
  size_t total = 256;
  for (size_t i = offset; i < end; ++i) total += snap->items[i]->json.size() + 1;
  std::string body;
  body.reserve(total);
  body += "{\"kind\":\"";
  body += ri.list_kind;
  body += "\",\"apiVersion\":\"";
  body += ri.apiVersion();
  body += "\",\"metadata\":{\"resourceVersion\":\"" + std::to_string(snap->rv) + "\"";
  if (!next.empty()) body += ",\"continue\":\"" + next + "\"";
  body += "},\"items\":[";
  for (size_t i = offset; i < end; ++i) {
    if (i != offset) body += ',';
    body += snap->items[i]->json;
  }
  body += "]}";
  return respond(200, body, "application/json", write);
}

bool FakeKubeApiServer::handleWatch(Conn& conn, const Route& route, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  const KubeKind& ri = *route.kind;
  auto labels = LabelSelector::parse(req.param("labelSelector"));
  if (!labels) return respond(400, statusJson(400, "BadRequest", labels.error()), "application/json", write);
  auto fields = FieldSelector::parse(req.param("fieldSelector"), ri);
  if (!fields) return respond(400, statusJson(400, "BadRequest", fields.error()), "application/json", write);
  bool filtered = !labels->empty() || !fields->empty();
  bool table = wantsTable(req.header("accept"));
  std::string prefix = ri.namespaced && !route.ns.empty() ? route.ns + "/" : "";
  std::string rv_param = req.param("resourceVersion");
  bool bookmarks = req.param("allowWatchBookmarks") == "true" || req.param("allowWatchBookmarks") == "1";
  long timeout = 1800;
  if (auto t = req.param("timeoutSeconds"); !t.empty()) timeout = std::stol(t);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  auto gone = [&](uint64_t from) {
    return statusJson(410, "Expired", "too old resource version: " + std::to_string(from) + " (" +
                                          std::to_string(floor_ + 1) + ")");
  };
  bool first_table = true;
  // An event line for this watch, or empty when the watch does not see it.
  auto eventLine = [&](const char* type, const std::string& k, const std::string& text,
                       const std::string* previous) -> std::string {
    if (!prefix.empty() && k.compare(0, prefix.size(), prefix) != 0) return "";
    std::string out_type = type;
    json obj;
    if (filtered || table) {
      obj = json::parse(text, nullptr, false);
      if (obj.is_discarded()) return filtered ? "" : "{\"type\":\"" + out_type + "\",\"object\":" + text + "}\n";
    }
    if (filtered) {
      auto match = [&](const json& o) {
        return labels->matches(o.value("/metadata/labels"_json_pointer, json::object())) && fields->matches(o);
      };
      bool now = match(obj);
      bool before = false;
      if (previous != nullptr) {
        json p = json::parse(*previous, nullptr, false);
        before = !p.is_discarded() && match(p);
      }
      if (out_type == "MODIFIED") {
        if (now && !before) out_type = "ADDED";
        else if (!now && before) out_type = "DELETED";
        else if (!now) return "";
      } else if (!now) {
        return "";
      }
    }
    if (table) {
      json t = kubeTable(ri, {obj}, json::object(), std::chrono::system_clock::now());
      if (!first_table) t["columnDefinitions"] = json::array();
      first_table = false;
      return json{{"type", out_type}, {"object", t}}.dump() + "\n";
    }
    return "{\"type\":\"" + out_type + "\",\"object\":" + text + "}\n";
  };
  std::string initial;
  uint64_t last;
  uint64_t my_drop;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stats_.watches++;
    my_drop = drop_generation_;
    if (rv_param.empty() || rv_param == "0") {
      for (const auto& [k, v] : objects_[static_cast<int>(ri.id)]) initial += eventLine("ADDED", k, v->json, nullptr);
      last = rv_;
    } else {
      last = std::strtoull(rv_param.c_str(), nullptr, 10);
      if (last < floor_) {
        std::string body = gone(last);
        lock.unlock();
        if (options_.gone_as_status) return respond(410, body, "application/json", write);
        return conn.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n") &&
               conn.chunk("{\"type\":\"ERROR\",\"object\":" + body + "}\n") && conn.write("0\r\n\r\n");
      }
    }
    stats_.open_watches++;
  }
  struct OpenWatch {
    FakeKubeApiServer* s;
    ~OpenWatch() {
      std::lock_guard<std::mutex> lock(s->mu_);
      s->stats_.open_watches--;
    }
  } open_watch{this};
  if (!conn.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"))
    return false;
  if (!conn.chunk(initial)) return false;
  auto interval = options_.bookmark_interval;
  auto next_bookmark = std::chrono::steady_clock::now() + interval;
  while (true) {
    std::string out;
    bool dropped = false, mid_event = false, expired = false, quiet = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto wake = deadline;
      if (bookmarks && interval.count() > 0) wake = std::min(wake, next_bookmark);
      cv_.wait_until(lock, wake,
                     [&] { return stopping_ || drop_generation_ != my_drop || (!paused_ && rv_ > last); });
      if (stopping_) return false;
      if (drop_generation_ != my_drop) {
        dropped = true;
        mid_event = drop_mid_event_;
      } else if (paused_) {
        quiet = true;  // nothing goes out, bookmarks included
      } else if (last < floor_) {
        expired = true;
        out = "{\"type\":\"ERROR\",\"object\":" + gone(last) + "}\n";
      } else {
        auto it = std::upper_bound(history_.begin(), history_.end(), last,
                                   [](uint64_t v, const Event& e) { return v < e.rv; });
        for (; it != history_.end(); ++it) {
          if (it->resource != ri.id) continue;
          std::string k;
          if (!prefix.empty()) {
            json o = json::parse(it->object->json, nullptr, false);
            if (!o.is_discarded()) k = key(o.value("/metadata/namespace"_json_pointer, std::string()), "");
          }
          out += eventLine(it->type, k, it->object->json, it->previous ? &it->previous->json : nullptr);
        }
        last = rv_;
      }
    }
    if (dropped) {
      if (mid_event) conn.chunk("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"");
      conn.abort();
      return false;
    }
    if (!conn.chunk(out)) return false;
    if (expired) return conn.write("0\r\n\r\n");
    auto now = std::chrono::steady_clock::now();
    if (bookmarks && !quiet && interval.count() > 0 && now >= next_bookmark) {
      std::string bm = std::string("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"") + ri.kind +
                       "\",\"apiVersion\":\"" + ri.apiVersion() + "\",\"metadata\":{\"resourceVersion\":\"" +
                       std::to_string(last) + "\"}}}\n";
      if (!conn.chunk(bm)) return false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto& sent = stats_.last_bookmark_rv[static_cast<size_t>(ri.id)];
        sent = std::max(sent, last);
      }
      next_bookmark = now + interval;
    }
    if (now >= deadline) return conn.write("0\r\n\r\n");
  }
}

namespace {

// The body of a create, update or patch: JSON, YAML when the client says so,
// or Kubernetes protobuf for the kinds fake_kube_protobuf.h decodes (what
// client-go's typed clients, and so kubectl's generators, send).
Result<json> parseBody(const std::string& body, const std::string& content_type) {
  if (isKubeProtobuf(content_type)) return decodeKubeProtobuf(body);
  if (content_type.find("protobuf") != std::string::npos)
    return Error{"the body of the request was in an unknown format - accepted media types include: "
                 "application/json, application/yaml, application/vnd.kubernetes.protobuf",
                 ErrorCode::kNotSupported};
  if (content_type.find("yaml") != std::string::npos) {
    auto doc = parseConfigText(body, "the request body");
    if (!doc) return Error{doc.error(), ErrorCode::kInvalid};
    return *doc;
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return Error{"the request body is not valid JSON", ErrorCode::kInvalid};
  return j;
}

}  // namespace

Result<void> FakeKubeApiServer::validateLocked(KubeResource r, json& obj, const std::string& field_validation,
                                               std::vector<std::string>& warnings, bool creating) {
  const KubeKind& k = info(r);
  std::string kind = k.kind, version = k.version;
  auto handled = [&](const std::string& why) {
    return Error{kind + " in version \"" + version + "\" cannot be handled as a " + kind + ": " + why,
                 ErrorCode::kFailed};
  };
  if (!obj.is_object()) return handled("the body is not a JSON object");
  std::string type = KubeSchema::builtin().rootType(k.apiVersion(), k.kind);
  if (!type.empty()) {
    bool strict = field_validation == "Strict";
    auto findings = KubeSchema::builtin().check(type, obj, !strict);
    if (!findings.type_error.empty()) return handled(findings.type_error);
    if (!findings.unknown.empty()) {
      if (strict) {
        std::string msg = "strict decoding error: ";
        for (size_t i = 0; i < findings.unknown.size(); ++i)
          msg += (i ? ", " : "") + std::string("unknown field \"") + findings.unknown[i] + "\"";
        return handled(msg);
      }
      if (field_validation != "Ignore")
        for (const auto& u : findings.unknown) warnings.push_back("unknown field \"" + u + "\"");
    }
  }
  // What the real server's validation says, for the fields clients get wrong.
  std::string name = obj.value("/metadata/name"_json_pointer, std::string());
  std::vector<std::pair<std::string, std::string>> causes;  // field, message
  auto invalid = [&](const std::string& field, const std::string& message) { causes.emplace_back(field, message); };
  if (creating) {
    if (name.empty()) invalid("metadata.name", "Required value: name or generateName is required");
    else if (auto p = kubeNameProblem(k.name_rule, name); !p.empty())
      invalid("metadata.name", "Invalid value: \"" + name + "\": " + p);
  }
  const json labels = obj.value("/metadata/labels"_json_pointer, json::object());
  for (const auto& [lk, lv] : labels.items()) {
    if (!lv.is_string()) continue;
    if (auto p = labelProblem(lk, lv.get<std::string>()); !p.empty()) causes.emplace_back("metadata.labels", p.substr(17));
  }
  const json spec = obj.value("spec", json::object());
  switch (r) {
    case KubeResource::kPods: {
      auto containers = spec.value("containers", json::array());
      if (containers.empty()) invalid("spec.containers", "Required value");
      std::set<std::string> names;
      for (size_t i = 0; i < containers.size(); ++i) {
        std::string p = "spec.containers[" + std::to_string(i) + "]";
        std::string cn = containers[i].value("name", "");
        if (cn.empty()) invalid(p + ".name", "Required value");
        else if (!kubeNameProblem(KubeNameRule::kLabel, cn).empty())
          invalid(p + ".name", "Invalid value: \"" + cn + "\": " + kubeNameProblem(KubeNameRule::kLabel, cn));
        else if (!names.insert(cn).second) invalid(p + ".name", "Duplicate value: \"" + cn + "\"");
        if (containers[i].value("image", "").empty()) invalid(p + ".image", "Required value");
        for (const auto& port : containers[i].value("ports", json::array())) {
          int64_t cp = port.value("containerPort", 0);
          if (cp < 1 || cp > 65535)
            invalid(p + ".ports.containerPort", "Invalid value: " + std::to_string(cp) + ": must be between 1 and 65535, inclusive");
        }
      }
      break;
    }
    case KubeResource::kServices: {
      std::string t = spec.value("type", "ClusterIP");
      if (t != "ClusterIP" && t != "NodePort" && t != "LoadBalancer" && t != "ExternalName")
        invalid("spec.type", "Unsupported value: \"" + t +
                                 "\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"");
      auto ports = spec.value("ports", json::array());
      bool headless = spec.value("clusterIP", "") == "None";
      auto ips = spec.value("clusterIPs", json::array());
      for (size_t i = 0; i < ips.size(); ++i) {
        std::string ip = ips[i].is_string() ? ips[i].get<std::string>() : "";
        if (ip != "None" && !IpAddress::parse(ip))
          invalid("spec.clusterIPs[" + std::to_string(i) + "]", "Invalid value: \"" + ip + "\": must be a valid IP address");
      }
      auto external = spec.value("externalIPs", json::array());
      for (size_t i = 0; i < external.size(); ++i) {
        std::string ip = external[i].is_string() ? external[i].get<std::string>() : "";
        if (!IpAddress::parse(ip))
          invalid("spec.externalIPs[" + std::to_string(i) + "]", "Invalid value: \"" + ip + "\": must be a valid IP address");
      }
      int64_t timeout = spec.value("/sessionAffinityConfig/clientIP/timeoutSeconds"_json_pointer, int64_t{10800});
      if (timeout < 1 || timeout > 86400)
        invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                "Invalid value: " + std::to_string(timeout) + ": must be greater than 0 and less than 86400");
      if (ports.empty() && t != "ExternalName" && !headless) invalid("spec.ports", "Required value");
      std::set<std::string> port_names;
      for (size_t i = 0; i < ports.size(); ++i) {
        std::string p = "spec.ports[" + std::to_string(i) + "]";
        int64_t port = ports[i].value("port", 0);
        if (port < 1 || port > 65535)
          invalid(p + ".port", "Invalid value: " + std::to_string(port) + ": must be between 1 and 65535, inclusive");
        std::string proto = ports[i].value("protocol", "TCP");
        if (proto != "TCP" && proto != "UDP" && proto != "SCTP")
          invalid(p + ".protocol", "Unsupported value: \"" + proto + "\": supported values: \"SCTP\", \"TCP\", \"UDP\"");
        std::string pn = ports[i].value("name", "");
        if (ports.size() > 1 && pn.empty()) invalid(p + ".name", "Required value");
        if (!pn.empty() && !port_names.insert(pn).second) invalid(p + ".name", "Duplicate value: \"" + pn + "\"");
        for (size_t j = 0; j < i; ++j)
          if (ports[j].value("port", 0) == port && ports[j].value("protocol", "TCP") == proto)
            invalid(p, "Duplicate value: core.ServicePort{Name:\"" + pn + "\", Protocol:\"" + proto +
                           "\", Port:" + std::to_string(port) + "}");
        if (ports[i].contains("targetPort")) portOrName(p + ".targetPort", ports[i]["targetPort"], invalid);
        // The real server's default --service-node-port-range.
        int64_t node_port = ports[i].value("nodePort", int64_t{0});
        if (node_port != 0 && (node_port < 30000 || node_port > 32767))
          invalid(p + ".nodePort", "Invalid value: " + std::to_string(node_port) +
                                       ": provided port is not in the valid range. The range of valid ports is 30000-32767");
      }
      break;
    }
    case KubeResource::kEndpointSlices: {
      std::string at = obj.value("addressType", "");
      if (at.empty()) invalid("addressType", "Required value");
      else if (at != "IPv4" && at != "IPv6" && at != "FQDN")
        invalid("addressType", "Unsupported value: \"" + at + "\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"");
      if (!obj.contains("endpoints") || obj["endpoints"].is_null()) invalid("endpoints", "Required value");
      auto eps = obj.value("endpoints", json::array());
      for (size_t i = 0; i < eps.size(); ++i) {
        auto addresses = eps[i].value("addresses", json::array());
        size_t n = addresses.size();
        if (n < 1 || n > 100)
          invalid("endpoints[" + std::to_string(i) + "].addresses",
                  "Invalid value: " + std::to_string(n) + ": must contain between 1 and 100 addresses");
        for (size_t a = 0; a < n && at != "FQDN"; ++a) {
          std::string text = addresses[a].is_string() ? addresses[a].get<std::string>() : "";
          auto ip = IpAddress::parse(text);
          if (!ip || ip->isV4() != (at == "IPv4"))
            invalid("endpoints[" + std::to_string(i) + "].addresses[" + std::to_string(a) + "]",
                    "Invalid value: \"" + text + "\": must be a valid " + at + " address");
          else if (ip->isLoopback())
            invalid("endpoints[" + std::to_string(i) + "].addresses[" + std::to_string(a) + "]",
                    "Invalid value: \"" + text + "\": may not be in the loopback range (127.0.0.0/8, ::1/128)");
        }
      }
      break;
    }
    case KubeResource::kNetworkPolicies: {
      for (const auto& t : spec.value("policyTypes", json::array()))
        if (t != "Ingress" && t != "Egress")
          invalid("spec.policyTypes", "Unsupported value: " + t.dump() + ": supported values: \"Egress\", \"Ingress\"");
      validateSelector("spec.podSelector", spec.value("podSelector", json::object()), invalid);
      for (const char* dir : {"ingress", "egress"}) {
        auto rules = spec.value(dir, json::array());
        for (size_t i = 0; i < rules.size(); ++i) {
          std::string rp = std::string("spec.") + dir + "[" + std::to_string(i) + "]";
          auto ports = rules[i].value("ports", json::array());
          for (size_t j = 0; j < ports.size(); ++j)
            validatePolicyPort(rp + ".ports[" + std::to_string(j) + "]", ports[j], invalid);
          const char* peers_key = std::string(dir) == "ingress" ? "from" : "to";
          auto peers = rules[i].value(peers_key, json::array());
          for (size_t j = 0; j < peers.size(); ++j)
            validatePeer(rp + "." + peers_key + "[" + std::to_string(j) + "]", peers[j], invalid);
        }
      }
      break;
    }
    default: break;
  }
  if (!causes.empty()) return invalidObject(k, name, causes);
  return {};
}

Result<void> FakeKubeApiServer::assignServiceIpsLocked(const std::string& store_key, json& obj, const json* old) {
  std::set<IpAddress> taken;
  for (const auto& [k, s] : objects_[static_cast<int>(KubeResource::kServices)]) {
    if (k == store_key) continue;
    json o = json::parse(s->json, nullptr, false);
    if (o.is_discarded()) continue;
    json ips = o.value("/spec/clusterIPs"_json_pointer, json::array());
    if (!ips.is_array()) ips = json::array();
    ips.push_back(o.value("/spec/clusterIP"_json_pointer, json()));
    for (const auto& ip : ips)
      if (ip.is_string())
        if (auto a = IpAddress::parse(ip.get<std::string>())) taken.insert(*a);
  }
  if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
  json old_spec = old != nullptr ? old->value("spec", json::object()) : json();
  auto problems = assignServiceIps(obj["spec"], old != nullptr ? &old_spec : nullptr, service_cidrs_, taken);
  if (!problems.internal.empty()) return Error{problems.internal};
  if (!problems.causes.empty())
    return invalidObject(info(KubeResource::kServices), obj.value("/metadata/name"_json_pointer, std::string()),
                         problems.causes);
  return {};
}

void FakeKubeApiServer::defaultLocked(KubeResource r, json& obj, const json* old) {
  json& meta = obj["metadata"];
  if (old == nullptr) {
    static std::mt19937_64 rng(std::random_device{}());
    char uid[40];
    uint64_t a = rng(), b = rng();
    snprintf(uid, sizeof uid, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(a >> 32),
             static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
             static_cast<unsigned>(b >> 52), static_cast<unsigned long long>(b & 0xffffffffffffULL));
    meta["uid"] = uid;
    meta["creationTimestamp"] = nowStamp();
    if (r != KubeResource::kNamespaces && r != KubeResource::kNodes) meta["generation"] = 1;
  } else {
    for (const char* f : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}) {
      if ((*old)["metadata"].contains(f)) meta[f] = (*old)["metadata"][f];
      else meta.erase(f);
    }
    if (old->contains("spec") && obj.value("spec", json()) != (*old)["spec"] && meta.contains("generation"))
      meta["generation"] = meta.value("generation", 1) + 1;
  }
  if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
  json& spec = obj["spec"];
  switch (r) {
    case KubeResource::kNamespaces:
      if (old == nullptr) {
        spec["finalizers"] = {"kubernetes"};
        obj["status"] = {{"phase", "Active"}};
      }
      // Every namespace carries its name as a label (NetworkPolicy namespaceSelectors rely on it).
      meta["labels"]["kubernetes.io/metadata.name"] = meta.value("name", "");
      break;
    case KubeResource::kPods:
      if (old == nullptr) {
        if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
        if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
        if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
        if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
        if (!spec.contains("serviceAccountName")) spec["serviceAccountName"] = "default";
        if (!spec.contains("enableServiceLinks")) spec["enableServiceLinks"] = true;
        if (!spec.contains("securityContext")) spec["securityContext"] = json::object();
        for (auto& c : spec["containers"]) {
          std::string image = c.value("image", "");
          // No tag (after the last '/') or ":latest", and no digest: Always, as the real defaulting does.
          size_t slash = image.rfind('/');
          size_t colon = image.find(':', slash == std::string::npos ? 0 : slash);
          bool latest = image.find('@') == std::string::npos &&
                        (colon == std::string::npos || image.substr(colon + 1) == "latest");
          if (!c.contains("imagePullPolicy")) c["imagePullPolicy"] = latest ? "Always" : "IfNotPresent";
          if (!c.contains("terminationMessagePath")) c["terminationMessagePath"] = "/dev/termination-log";
          if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
          if (c.contains("ports"))
            for (auto& p : c["ports"])
              if (!p.contains("protocol")) p["protocol"] = "TCP";
        }
        obj["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
      }
      break;
    case KubeResource::kServices: {
      if (!spec.contains("type")) spec["type"] = "ClusterIP";
      if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
      std::string type = spec["type"];
      // (The cluster IP fields: assignServiceIpsLocked, before this.)
      if (type != "ExternalName" && !spec.contains("internalTrafficPolicy")) spec["internalTrafficPolicy"] = "Cluster";
      std::set<int64_t> node_ports;
      for (const auto& [sk, stored] : objects_[static_cast<int>(KubeResource::kServices)]) {
        json o = json::parse(stored->json, nullptr, false);
        if (o.is_discarded()) continue;
        for (const auto& p : o.value("/spec/ports"_json_pointer, json::array()))
          if (p.contains("nodePort")) node_ports.insert(p.value("nodePort", int64_t{0}));
      }
      int64_t next_node_port = 30000;
      if (spec.contains("ports"))
        for (auto& p : spec["ports"]) {
          if (!p.contains("protocol")) p["protocol"] = "TCP";
          if (!p.contains("targetPort")) p["targetPort"] = p.value("port", 0);
          if ((type == "NodePort" || type == "LoadBalancer") && !p.contains("nodePort")) {
            while (node_ports.count(next_node_port)) next_node_port++;
            node_ports.insert(next_node_port);
            p["nodePort"] = next_node_port;
          }
        }
      if ((type == "NodePort" || type == "LoadBalancer") && !spec.contains("externalTrafficPolicy"))
        spec["externalTrafficPolicy"] = "Cluster";
      // DefaultClientIPServiceAffinitySeconds.
      if (spec.value("sessionAffinity", "") == "ClientIP" &&
          !spec.contains("/sessionAffinityConfig/clientIP/timeoutSeconds"_json_pointer))
        spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] = 10800;
      if (old == nullptr) obj["status"] = {{"loadBalancer", json::object()}};
      break;
    }
    case KubeResource::kEndpointSlices:
      if (obj.contains("ports"))
        for (auto& p : obj["ports"])
          if (!p.contains("protocol")) p["protocol"] = "TCP";
      break;
    case KubeResource::kNetworkPolicies:
      if (!spec.contains("podSelector")) spec["podSelector"] = json::object();
      if (!spec.contains("policyTypes")) {
        // Egress too when there is an egress rule (an empty list is none).
        json types = {"Ingress"};
        if (spec.contains("egress") && spec["egress"].is_array() && !spec["egress"].empty()) types.push_back("Egress");
        spec["policyTypes"] = types;
      }
      for (const char* dir : {"ingress", "egress"})
        if (spec.contains(dir))
          for (auto& rule : spec[dir])
            if (rule.contains("ports"))
              for (auto& p : rule["ports"])
                if (!p.contains("protocol")) p["protocol"] = "TCP";
      break;
    case KubeResource::kNodes: break;
  }
  if (r == KubeResource::kEndpointSlices) obj.erase("spec");
}

FakeKubeApiServer::Reply FakeKubeApiServer::statusReply(int code, const std::string& reason, const std::string& msg,
                                                         const json& details) {
  return Reply{code, statusJson(code, reason, msg, details), "application/json", {}};
}

// A refusal of validation or allocation: 422 with the causes (they ride on
// the message, a JSON suffix after its first line), else `code`.
FakeKubeApiServer::Reply FakeKubeApiServer::refusedReply(const Result<void>& r, int code) {
  if (r.code() == ErrorCode::kInvalid) {
    size_t nl = r.error().find('\n');
    return statusReply(422, "Invalid", r.error().substr(0, nl), json::parse(r.error().substr(nl + 1)));
  }
  if (code == 500) return statusReply(500, "InternalError", "Internal error occurred: " + r.error());
  return statusReply(code, "BadRequest", r.error());
}

FakeKubeApiServer::Reply FakeKubeApiServer::handleCreate(const Route& route, const Request& req) {
  const KubeKind& k = *route.kind;
  auto body = parseBody(req.body, req.header("content-type"));
  if (!body)
    return body.code() == ErrorCode::kNotSupported ? statusReply(415, "UnsupportedMediaType", body.error())
                                                   : statusReply(400, "BadRequest", body.error());
  json obj = std::move(*body);
  if (!obj.is_object()) return statusReply(400, "BadRequest", "the request body is not a JSON object");
  std::string api_version = obj.value("apiVersion", ""), kind = obj.value("kind", "");
  if (kind.empty() || api_version.empty())
    return statusReply(400, "BadRequest", "Object 'Kind' is missing in '" + req.body.substr(0, 200) + "'");
  if (kind != k.kind || api_version != k.apiVersion())
    return statusReply(400, "BadRequest", "the API version in the data (" + api_version + ") does not match the expected API "
                                  "version (" + k.apiVersion() + ") or the kind (" + kind + ") is not " + k.kind);
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& meta = obj["metadata"];
  if (k.namespaced) {
    std::string body_ns = meta.value("namespace", "");
    if (!body_ns.empty() && body_ns != route.ns)
      return statusReply(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
    meta["namespace"] = route.ns;
  } else {
    meta.erase("namespace");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (meta.value("name", "").empty() && !meta.value("generateName", "").empty()) {
    static const char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
    std::string suffix;
    uint64_t v = ++uid_counter_ * 2654435761u + rv_;
    for (int i = 0; i < 5; ++i, v /= 27) suffix += kChars[v % 27];
    meta["name"] = meta["generateName"].get<std::string>() + suffix;
  }
  std::vector<std::string> warnings;
  if (auto v = validateLocked(k.id, obj, req.param("fieldValidation"), warnings, true); !v) return refusedReply(v, 400);
  std::string name = meta.value("name", "");
  if (k.namespaced) {
    auto& namespaces = objects_[static_cast<int>(KubeResource::kNamespaces)];
    auto ns = namespaces.find(route.ns);
    if (ns == namespaces.end())
      return statusReply(404, "NotFound", "namespaces \"" + route.ns + "\" not found",
                 {{"name", route.ns}, {"kind", "namespaces"}});
    if (ns->second->json.find("\"deletionTimestamp\"") != std::string::npos)
      return statusReply(403, "Forbidden", qualified(k) + " \"" + name + "\" is forbidden: unable to create new content in "
                                   "namespace " + route.ns + " because it is being terminated");
  }
  std::string store_key = k.namespaced ? key(route.ns, name) : name;
  auto& store = objects_[static_cast<int>(k.id)];
  if (store.count(store_key))
    return statusReply(409, "AlreadyExists", qualified(k) + " \"" + name + "\" already exists",
               {{"name", name}, {"group", k.group}, {"kind", k.plural}});
  meta.erase("resourceVersion");
  meta.erase("selfLink");
  if (k.id == KubeResource::kServices)
    if (auto a = assignServiceIpsLocked(store_key, obj, nullptr); !a) return refusedReply(a, 500);
  defaultLocked(k.id, obj, nullptr);
  stats_.writes++;
  if (req.param("dryRun") == "All") return Reply{201, obj.dump(), "application/json", warnings};
  meta["resourceVersion"] = std::to_string(rv_ + 1);
  storeLocked(k.id, store_key, obj.dump(), "ADDED");
  return Reply{201, obj.dump(), "application/json", warnings};
}

FakeKubeApiServer::Reply FakeKubeApiServer::handleUpdate(const Route& route, const Request& req, bool patch) {
  const KubeKind& k = *route.kind;
  std::string ct = req.header("content-type");
  std::lock_guard<std::mutex> lock(mu_);
  if (patch) {
    stats_.patches++;
    stats_.last_patch_content_type = ct;
  }
  auto& store = objects_[static_cast<int>(k.id)];
  auto it = store.find(route.storeKey());
  if (it == store.end())
    return statusReply(404, "NotFound", route.what() + " not found", {{"name", route.name}, {"kind", k.plural}, {"group", k.group}});
  json old = json::parse(it->second->json, nullptr, false);
  if (old.is_discarded()) old = json::object();
  json obj;
  if (patch) {
    obj = old;
    if (ct.rfind("application/merge-patch+json", 0) == 0) {
      json p = json::parse(req.body, nullptr, false);
      if (p.is_discarded() || !p.is_object()) return statusReply(400, "BadRequest", "the patch is not a JSON object");
      obj.merge_patch(p);
    } else if (ct.rfind("application/strategic-merge-patch+json", 0) == 0) {
      json p = json::parse(req.body, nullptr, false);
      if (p.is_discarded() || !p.is_object()) return statusReply(400, "BadRequest", "the patch is not a JSON object");
      std::string type = KubeSchema::builtin().rootType(k.apiVersion(), k.kind);
      if (auto r = KubeSchema::builtin().strategicMerge(type, obj, p); !r) return statusReply(400, "BadRequest", r.error());
    } else if (ct.rfind("application/json-patch+json", 0) == 0) {
      json p = json::parse(req.body, nullptr, false);
      if (p.is_discarded() || !p.is_array()) return statusReply(400, "BadRequest", "the JSON patch is not a list of operations");
      try {
        obj = obj.patch(p);
      } catch (const std::exception& e) {
        return statusReply(422, "Invalid", std::string("the JSON patch cannot be applied: ") + e.what());
      }
    } else if (ct.rfind("application/apply-patch", 0) == 0) {
      return statusReply(415, "UnsupportedMediaType",
                 "server-side apply is not implemented by the fake API server; use client-side apply "
                 "(kubectl apply without --server-side)");
    } else {
      return statusReply(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media "
                                              "types include: application/json-patch+json, application/merge-patch+json, "
                                              "application/apply-patch+yaml, application/strategic-merge-patch+json");
    }
  } else {
    auto body = parseBody(req.body, ct);
    if (!body)
      return body.code() == ErrorCode::kNotSupported ? statusReply(415, "UnsupportedMediaType", body.error())
                                                     : statusReply(400, "BadRequest", body.error());
    obj = std::move(*body);
    if (!obj.is_object() || obj.value("kind", "") != k.kind || obj.value("apiVersion", "") != k.apiVersion())
      return statusReply(400, "BadRequest", "the body must be a " + k.apiVersion() + " " + k.kind);
  }
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& meta = obj["metadata"];
  if (meta.value("name", route.name) != route.name)
    return statusReply(400, "BadRequest", "the name of the object (" + meta.value("name", "") +
                                  ") does not match the name on the URL (" + route.name + ")");
  meta["name"] = route.name;
  if (k.namespaced) meta["namespace"] = route.ns;
  // Optimistic concurrency: a resourceVersion in the request must be the current one.
  std::string asked = meta.value("resourceVersion", "");
  std::string current = old.value("/metadata/resourceVersion"_json_pointer, std::to_string(it->second->rv));
  bool patch_names_rv = false;
  if (patch) {
    json p = json::parse(req.body, nullptr, false);
    patch_names_rv = p.is_object() && p.contains("/metadata/resourceVersion"_json_pointer);
  }
  if ((!patch || patch_names_rv) && !asked.empty() && asked != current)
    return statusReply(409, "Conflict", "Operation cannot be fulfilled on " + route.what() +
                                    ": the object has been modified; please apply your changes to the latest version "
                                    "and try again",
               {{"name", route.name}, {"group", k.group}, {"kind", k.plural}});
  // The status subresource changes status only; the main resource never changes status.
  if (k.status_subresource) {
    if (route.sub == "status") {
      json status = obj.value("status", json::object());
      obj = old;  // (`meta` refers into the object replaced here: not used below)
      obj["status"] = status;
    } else if (old.contains("status")) {
      obj["status"] = old["status"];
    } else {
      obj.erase("status");
    }
  }
  std::vector<std::string> warnings;
  if (auto v = validateLocked(k.id, obj, req.param("fieldValidation"), warnings, false); !v) return refusedReply(v, 400);
  // What cannot change after create.
  if (k.id == KubeResource::kPods && route.sub.empty()) {
    json a = old.value("spec", json::object()), b = obj.value("spec", json::object());
    for (json* s : {&a, &b}) {
      for (const char* list : {"containers", "initContainers"})
        if (s->contains(list))
          for (auto& c : (*s)[list]) c.erase("image");
      s->erase("activeDeadlineSeconds");
      s->erase("tolerations");
      s->erase("schedulingGates");
    }
    if (a != b)
      return statusReply(422, "Invalid",
                 "Pod \"" + route.name + "\" is invalid: spec: Forbidden: pod updates may not change fields other than "
                 "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                 "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                 "(allow it to be set to 1 if it was previously negative)");
  }
  if (k.id == KubeResource::kServices && route.sub.empty())
    if (auto a = assignServiceIpsLocked(route.storeKey(), obj, &old); !a) return refusedReply(a, 500);
  if (k.id == KubeResource::kNamespaces && old.contains("spec")) obj["spec"] = old["spec"];
  defaultLocked(k.id, obj, &old);
  stats_.writes++;
  if (req.param("dryRun") == "All") return Reply{200, obj.dump(), "application/json", warnings};
  // Not through `meta`: a status write replaced obj with the stored object above.
  obj["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
  std::string store_key = route.storeKey();
  storeLocked(k.id, store_key, obj.dump(), "MODIFIED");
  // An object waiting for its finalizers goes once the last one is removed.
  if (obj.contains("/metadata/deletionTimestamp"_json_pointer) &&
      obj.value("/metadata/finalizers"_json_pointer, json::array()).empty() && k.id != KubeResource::kPods &&
      k.id != KubeResource::kNamespaces) {
    eraseLocked(k.id, store_key);
  }
  return Reply{200, obj.dump(), "application/json", warnings};
}

void FakeKubeApiServer::eraseLocked(KubeResource r, const std::string& k) {
  auto& store = objects_[static_cast<int>(r)];
  auto it = store.find(k);
  if (it == store.end()) return;
  // The DELETED event carries the object's last state at the deletion's version.
  json obj = json::parse(it->second->json, nullptr, false);
  uint64_t rv = ++rv_;
  std::string text = it->second->json;
  std::string ns;
  if (obj.is_object()) {
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    ns = obj.value("/metadata/namespace"_json_pointer, std::string());
    text = obj.dump();
  }
  StoredPtr previous = it->second;
  store.erase(it);
  recordLocked(r, "DELETED", std::make_shared<Stored>(Stored{std::move(text), rv}), previous);
  if (!ns.empty() && r != KubeResource::kNamespaces) finishNamespaceLocked(ns);
}

void FakeKubeApiServer::finishNamespaceLocked(const std::string& ns) {
  auto& namespaces = objects_[static_cast<int>(KubeResource::kNamespaces)];
  auto it = namespaces.find(ns);
  if (it == namespaces.end() || it->second->json.find("\"deletionTimestamp\"") == std::string::npos) return;
  for (int i = 0; i < kKubeResourceCount; ++i) {
    if (!kubeKinds()[static_cast<size_t>(i)].namespaced) continue;
    auto lb = objects_[i].lower_bound(ns + "/");
    if (lb != objects_[i].end() && lb->first.compare(0, ns.size() + 1, ns + "/") == 0) return;
  }
  eraseLocked(KubeResource::kNamespaces, ns);
}

json FakeKubeApiServer::deleteLocked(KubeResource r, const std::string& k, int64_t grace) {
  auto& store = objects_[static_cast<int>(r)];
  auto it = store.find(k);
  json obj = json::parse(it->second->json, nullptr, false);
  if (obj.is_discarded()) {
    eraseLocked(r, k);
    return json::object();
  }
  bool marked = obj.contains("/metadata/deletionTimestamp"_json_pointer);
  auto mark = [&](int64_t seconds) {
    if (!marked) {
      obj["metadata"]["deletionTimestamp"] =
          kubeTimestamp(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
      obj["metadata"]["deletionGracePeriodSeconds"] = seconds;
    }
    obj["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
    storeLocked(r, k, obj.dump(), "MODIFIED");
  };
  if (r == KubeResource::kNamespaces) {
    if (!marked) {
      obj["status"]["phase"] = "Terminating";
      mark(0);
      for (int i = 0; i < kKubeResourceCount; ++i) {
        auto kind = static_cast<KubeResource>(i);
        if (!kubeKinds()[static_cast<size_t>(i)].namespaced) continue;
        std::vector<std::string> keys;
        for (auto lb = objects_[i].lower_bound(k + "/"); lb != objects_[i].end() && lb->first.rfind(k + "/", 0) == 0; ++lb)
          keys.push_back(lb->first);
        for (const auto& key : keys)
          if (objects_[i].count(key)) deleteLocked(kind, key, -1);
      }
    }
    finishNamespaceLocked(k);
    return obj;
  }
  if (!obj.value("/metadata/finalizers"_json_pointer, json::array()).empty()) {
    mark(0);
    return obj;
  }
  if (r == KubeResource::kPods) {
    std::string phase = obj.value("/status/phase"_json_pointer, std::string());
    if (grace < 0) grace = obj.value("/spec/terminationGracePeriodSeconds"_json_pointer, int64_t{30});
    if (phase == "Succeeded" || phase == "Failed") grace = 0;
    // A pod on a node terminates first: its kubelet stops it and deletes it with
    // grace 0 (an unscheduled pod has nothing to stop).
    if (!obj.value("/spec/nodeName"_json_pointer, std::string()).empty() && grace > 0) {
      mark(grace);
      return obj;
    }
  }
  eraseLocked(r, k);
  return obj;
}

FakeKubeApiServer::Reply FakeKubeApiServer::handleDelete(const Route& route, const Request& req) {
  const KubeKind& k = *route.kind;
  int64_t grace = -1;
  json opts;
  if (!req.body.empty() && isKubeProtobuf(req.header("content-type"))) {
    auto decoded = decodeKubeProtobuf(req.body);
    if (!decoded || decoded->value("kind", "") != "DeleteOptions") {
      bool media = !decoded && decoded.code() == ErrorCode::kNotSupported;
      int code = media ? 415 : 400;
      return Reply{code,
                   statusJson(code, media ? "UnsupportedMediaType" : "BadRequest",
                              decoded ? "the body of a DELETE must be DeleteOptions" : decoded.error()),
                   "application/json", {}};
    }
    opts = std::move(*decoded);
  } else {
    opts = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  }
  if (opts.is_object() && opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number())
    grace = opts["gracePeriodSeconds"].get<int64_t>();
  if (auto g = req.param("gracePeriodSeconds"); !g.empty()) grace = std::stoll(g);
  std::lock_guard<std::mutex> lock(mu_);
  auto& store = objects_[static_cast<int>(k.id)];
  auto it = store.find(route.storeKey());
  if (it == store.end())
    return Reply{404,
                 statusJson(404, "NotFound", route.what() + " not found",
                            {{"name", route.name}, {"kind", k.plural}, {"group", k.group}}),
                 "application/json",
                 {}};
  if (opts.is_object() && opts.contains("/preconditions/uid"_json_pointer)) {
    json cur = json::parse(it->second->json, nullptr, false);
    if (!cur.is_discarded() && cur.value("/metadata/uid"_json_pointer, std::string()) != opts["preconditions"]["uid"])
      return Reply{409, statusJson(409, "Conflict", "Precondition failed: UID in precondition does not match the object"),
                   "application/json", {}};
  }
  stats_.writes++;
  if (req.param("dryRun") == "All") return Reply{200, it->second->json, "application/json", {}};
  json obj = deleteLocked(k.id, route.storeKey(), grace);
  return Reply{200, obj.dump(), "application/json", {}};
}

FakeKubeApiServer::Reply FakeKubeApiServer::handleDeleteCollection(const Route& route, const Request& req) {
  const KubeKind& k = *route.kind;
  auto labels = LabelSelector::parse(req.param("labelSelector"));
  if (!labels) return Reply{400, statusJson(400, "BadRequest", labels.error()), "application/json", {}};
  auto fields = FieldSelector::parse(req.param("fieldSelector"), k);
  if (!fields) return Reply{400, statusJson(400, "BadRequest", fields.error()), "application/json", {}};
  std::lock_guard<std::mutex> lock(mu_);
  auto& store = objects_[static_cast<int>(k.id)];
  std::string prefix = k.namespaced && !route.ns.empty() ? route.ns + "/" : "";
  std::vector<std::string> keys;
  for (const auto& [key, s] : store) {
    if (!prefix.empty() && key.rfind(prefix, 0) != 0) continue;
    json o = json::parse(s->json, nullptr, false);
    if (o.is_discarded()) continue;
    if (labels->matches(o.value("/metadata/labels"_json_pointer, json::object())) && fields->matches(o))
      keys.push_back(key);
  }
  stats_.writes++;
  json items = json::array();
  for (const auto& key : keys)
    if (store.count(key)) items.push_back(deleteLocked(k.id, key, -1));
  return Reply{200, json{{"kind", k.list_kind}, {"apiVersion", k.apiVersion()}, {"metadata", json::object()}, {"items", items}}.dump(),
               "application/json", {}};
}

bool FakeKubeApiServer::handleControl(Conn& conn, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  auto ok = [&](const json& j) { return respond(200, j.dump(), "application/json", write); };
  auto bad = [&](int code, const std::string& m) {
    return respond(code, statusJson(code, "BadRequest", m), "application/json", write);
  };
  const std::string& p = req.path;
  if (p == "/fake/scale" && req.method == "POST") {
    FakeKubeScale s;
    auto num = [&](const char* k, uint32_t& v) {
      if (auto t = req.param(k); !t.empty()) v = static_cast<uint32_t>(std::stoul(t));
    };
    num("nodes", s.nodes);
    num("podsPerNode", s.pods_per_node);
    num("services", s.services);
    num("endpointsPerService", s.endpoints_per_service);
    num("namespaces", s.namespaces);
    loadScale(s);
    return ok({{"resourceVersion", std::to_string(resourceVersion())}});
  }
  if (p == "/fake/compact" && req.method == "POST") {
    compact();
    return ok(json::object());
  }
  if (p == "/fake/drop-watches" && req.method == "POST") {
    dropWatches(req.param("midEvent") == "true");
    return ok(json::object());
  }
  if (p == "/fake/stats" && req.method == "GET") {
    auto s = stats();
    return ok({{"lists", s.lists},
               {"watches", s.watches},
               {"patches", s.patches},
               {"writes", s.writes},
               {"forbidden", s.forbidden},
               {"openWatches", s.open_watches},
               {"resourceVersion", resourceVersion()}});
  }
  if (p == "/fake/rbac" && req.method == "GET") {
    json grants = json::array();
    for (const auto& g : rbacGrants())
      grants.push_back({{"role", g.role}, {"verb", g.verb}, {"apiGroup", g.api_group}, {"resource", g.resource},
                        {"resourceName", g.resource_name}, {"used", g.used}});
    return ok({{"denials", rbacDenials()}, {"grants", grants}});
  }
  if (p.rfind("/fake/objects/", 0) == 0) {
    std::string rest = p.substr(strlen("/fake/objects/"));
    std::string rname = rest.substr(0, rest.find('/'));
    const KubeKind* kk = kubeKindByControlName(rname);
    if (kk == nullptr) return bad(404, "no resource " + rname);
    KubeResource r = kk->id;
    if (req.method == "PUT" || req.method == "POST") {
      json obj = json::parse(req.body, nullptr, false);
      if (obj.is_discarded()) return bad(400, "the body is not JSON");
      // When the change happened, on CLOCK_MONOTONIC (steady_clock), which
      // another process can compare with its own clock readings.
      auto applied_at = std::chrono::steady_clock::now().time_since_epoch();
      auto rv = apply(r, std::move(obj));
      if (!rv.ok()) return bad(400, rv.error());
      return ok({{"resourceVersion", std::to_string(*rv)},
                 {"appliedAtNs", std::chrono::duration_cast<std::chrono::nanoseconds>(applied_at).count()}});
    }
    if (req.method == "DELETE") {
      std::string tail = rest.size() > rname.size() ? rest.substr(rname.size() + 1) : "";
      std::string ns, name = tail;
      if (size_t slash = tail.find('/'); slash != std::string::npos) {
        ns = tail.substr(0, slash);
        name = tail.substr(slash + 1);
      }
      if (!remove(r, ns, name)) return bad(404, "no such object");
      return ok(json::object());
    }
  }
  return bad(404, "no control endpoint " + req.method + " " + p);
}

void FakeKubeApiServer::recordLocked(KubeResource r, const char* type, StoredPtr obj, StoredPtr previous) {
  history_.push_back(Event{obj->rv, r, type, std::move(obj), std::move(previous)});
  while (history_.size() > options_.history) {
    floor_ = history_.front().rv;
    history_.pop_front();
  }
  cv_.notify_all();
}

uint64_t FakeKubeApiServer::storeLocked(KubeResource r, const std::string& k, std::string text, const char* type) {
  auto stored = std::make_shared<Stored>(Stored{std::move(text), ++rv_});
  auto& slot = objects_[static_cast<int>(r)][k];
  if (slot == nullptr && std::strcmp(type, "MODIFIED") == 0) type = "ADDED";
  if (slot != nullptr && std::strcmp(type, "ADDED") == 0) type = "MODIFIED";
  StoredPtr previous = slot;
  slot = stored;
  recordLocked(r, type, stored, previous);
  return stored->rv;
}

Result<uint64_t> FakeKubeApiServer::apply(KubeResource r, json object) {
  if (!object.is_object() || !object["metadata"].is_object() || !object["metadata"]["name"].is_string())
    return Error{"the object needs metadata.name"};
  std::string ns;
  if (info(r).namespaced) {
    if (!object["metadata"]["namespace"].is_string()) return Error{"the object needs metadata.namespace"};
    ns = object["metadata"]["namespace"].get<std::string>();
  }
  object["kind"] = info(r).kind;
  object["apiVersion"] = info(r).apiVersion();
  std::lock_guard<std::mutex> lock(mu_);
  object["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
  return storeLocked(r, key(ns, object["metadata"]["name"].get<std::string>()), object.dump(), "ADDED");
}

uint64_t FakeKubeApiServer::applyRaw(KubeResource r, const std::string& ns, const std::string& name,
                                     const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  return storeLocked(r, key(ns, name), text, "ADDED");
}

bool FakeKubeApiServer::remove(KubeResource r, const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& store = objects_[static_cast<int>(r)];
  if (store.find(key(ns, name)) == store.end()) return false;
  eraseLocked(r, key(ns, name));
  return true;
}

std::optional<json> FakeKubeApiServer::get(KubeResource r, const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& store = objects_[static_cast<int>(r)];
  auto it = store.find(key(ns, name));
  if (it == store.end()) return std::nullopt;
  json j = json::parse(it->second->json, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

size_t FakeKubeApiServer::count(KubeResource r) const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_[static_cast<int>(r)].size();
}

uint64_t FakeKubeApiServer::resourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

void FakeKubeApiServer::failResource(KubeResource r, int code) { failing_[static_cast<int>(r)].store(code); }

void FakeKubeApiServer::hangResource(KubeResource r, FakeKubeHang how) {
  std::lock_guard<std::mutex> lock(mu_);
  hanging_[static_cast<int>(r)] = how;
  cv_.notify_all();
}

void FakeKubeApiServer::compact() {
  std::lock_guard<std::mutex> lock(mu_);
  history_.clear();
  floor_ = rv_;
  cv_.notify_all();
}

void FakeKubeApiServer::dropWatches(bool mid_event) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_generation_++;
  drop_mid_event_ = mid_event;
  cv_.notify_all();
}

void FakeKubeApiServer::pauseWatches(bool paused) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = paused;
  cv_.notify_all();
}

void FakeKubeApiServer::setToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  token_ = token;
}

FakeKubeStats FakeKubeApiServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<std::string> FakeKubeApiServer::rbacDenials() const { return rbac_.denials(); }
std::vector<KubeGrant> FakeKubeApiServer::rbacGrants() const { return rbac_.grants(); }

// --- controllers -----------------------------------------------------------

void FakeKubeApiServer::bootstrapLocked() {
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    if (objects_[static_cast<int>(KubeResource::kNamespaces)].count(ns)) continue;
    json o = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
    defaultLocked(KubeResource::kNamespaces, o, nullptr);
    o["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
    storeLocked(KubeResource::kNamespaces, ns, o.dump(), "ADDED");
  }
  if (!objects_[static_cast<int>(KubeResource::kServices)].count("default/kubernetes")) {
    // The first address of the primary range, single stack: the real server's
    // `kubernetes` Service (that address is kept for it, so nothing else can hold it).
    json o = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "kubernetes"}, {"namespace", "default"},
                            {"labels", {{"component", "apiserver"}, {"provider", "kubernetes"}}}}},
              {"spec",
               {{"clusterIP", service_cidrs_.firstPrimary().str()},
                {"ipFamilyPolicy", "SingleStack"},
                {"ports", {{{"name", "https"}, {"port", 443}, {"protocol", "TCP"}, {"targetPort", port_}}}}}}};
    assignServiceIps(o["spec"], nullptr, service_cidrs_, {});
    defaultLocked(KubeResource::kServices, o, nullptr);
    o["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
    storeLocked(KubeResource::kServices, "default/kubernetes", o.dump(), "ADDED");
  }
}

void FakeKubeApiServer::scheduleLocked() {
  auto& pods = objects_[static_cast<int>(KubeResource::kPods)];
  std::vector<json> nodes;
  for (const auto& [k, s] : objects_[static_cast<int>(KubeResource::kNodes)]) {
    json n = json::parse(s->json, nullptr, false);
    if (n.is_discarded() || n.value("/spec/unschedulable"_json_pointer, false)) continue;
    nodes.push_back(std::move(n));
  }
  std::map<std::string, size_t> load;
  std::vector<std::pair<std::string, json>> pending;
  for (const auto& [k, s] : pods) {
    json p = json::parse(s->json, nullptr, false);
    if (p.is_discarded()) continue;
    std::string node = p.value("/spec/nodeName"_json_pointer, std::string());
    if (!node.empty()) {
      load[node]++;
      continue;
    }
    if (p.contains("/metadata/deletionTimestamp"_json_pointer)) continue;
    if (p.value("/spec/schedulerName"_json_pointer, std::string("default-scheduler")) != "default-scheduler") continue;
    pending.emplace_back(k, std::move(p));
  }
  for (auto& [k, p] : pending) {
    const json* best = nullptr;
    for (const auto& n : nodes) {
      if (!nodeFits(p, n)) continue;
      std::string name = n.value("/metadata/name"_json_pointer, std::string());
      if (best == nullptr || load[name] < load[best->value("/metadata/name"_json_pointer, std::string())]) best = &n;
    }
    json conditions = json::array();
    std::string message = "0/" + std::to_string(nodes.size()) + " nodes are available: no node matches the pod's node "
                          "selector, affinity and tolerations";
    bool already = false;
    for (const auto& c : p.value("/status/conditions"_json_pointer, json::array()))
      if (c.value("type", "") == "PodScheduled" && c.value("message", "") == message) already = true;
    if (best == nullptr) {
      if (already) continue;
      p["status"]["conditions"] = {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"},
                                    {"message", message}, {"lastTransitionTime", nowStamp()}}};
    } else {
      std::string name = best->value("/metadata/name"_json_pointer, std::string());
      p["spec"]["nodeName"] = name;
      load[name]++;
      p["status"]["conditions"] = {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", nowStamp()}}};
    }
    p["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
    storeLocked(KubeResource::kPods, k, p.dump(), "MODIFIED");
  }
}

void FakeKubeApiServer::syncEndpointSlicesLocked() {
  auto& slices = objects_[static_cast<int>(KubeResource::kEndpointSlices)];
  std::set<std::string> wanted;
  std::vector<json> pods;
  for (const auto& [k, s] : objects_[static_cast<int>(KubeResource::kPods)]) {
    json p = json::parse(s->json, nullptr, false);
    if (!p.is_discarded()) pods.push_back(std::move(p));
  }
  for (const auto& [k, s] : objects_[static_cast<int>(KubeResource::kServices)]) {
    json svc = json::parse(s->json, nullptr, false);
    if (svc.is_discarded()) continue;
    json selector = svc.value("/spec/selector"_json_pointer, json::object());
    if (selector.empty() || svc.value("/spec/type"_json_pointer, std::string()) == "ExternalName") continue;
    std::string ns = svc.value("/metadata/namespace"_json_pointer, std::string());
    std::string name = svc.value("/metadata/name"_json_pointer, std::string());
    std::string uid = svc.value("/metadata/uid"_json_pointer, name);
    json ports = json::array();
    for (const auto& port : svc.value("/spec/ports"_json_pointer, json::array())) {
      json target = port.value("targetPort", port.value("port", json(0)));
      json out = {{"protocol", port.value("protocol", "TCP")}};
      if (port.contains("name")) out["name"] = port["name"];
      if (target.is_number()) {
        out["port"] = target;
      } else {
        // A named target port: the first selected pod's container port of that name.
        for (const auto& p : pods)
          if (p.value("/metadata/namespace"_json_pointer, std::string()) == ns &&
              selectorMatches(selector, p.value("/metadata/labels"_json_pointer, json::object())))
            for (const auto& c : p.value("/spec/containers"_json_pointer, json::array()))
              for (const auto& cp : c.value("ports", json::array()))
                if (cp.value("name", "") == target && !out.contains("port")) out["port"] = cp["containerPort"];
      }
      ports.push_back(out);
    }
    // A slice per address family of the Service (the real controller's), each
    // with the selected pods' addresses of that family.
    for (const std::string& family : serviceAddressTypes(svc.value("spec", json::object()))) {
      // The IPv4 slice keeps the name it had before slices were per family.
      std::string slice_name =
          name + "-" + std::to_string(std::hash<std::string>{}(family == "IPv4" ? uid : uid + "/" + family) % 100000);
      std::string slice_key = key(ns, slice_name);
      wanted.insert(slice_key);
      json endpoints = json::array();
      for (const auto& p : pods) {
        if (p.value("/metadata/namespace"_json_pointer, std::string()) != ns) continue;
        if (!selectorMatches(selector, p.value("/metadata/labels"_json_pointer, json::object()))) continue;
        // status.podIPs (podIP alone: a status written by a client that knows only podIP, which
        // the real server copies into podIPs).
        std::vector<std::string> ips;
        for (const auto& entry : p.value("/status/podIPs"_json_pointer, json::array()))
          if (entry.is_object() && entry.value("ip", json()).is_string()) ips.push_back(entry["ip"]);
        if (ips.empty() && !p.value("/status/podIP"_json_pointer, std::string()).empty())
          ips.push_back(p["status"]["podIP"]);
        std::string ip;
        for (const auto& candidate : ips)
          if (auto a = IpAddress::parse(candidate); a && a->isV4() == (family == "IPv4")) {
            ip = candidate;
            break;
          }
        if (ip.empty()) continue;
        bool ready = false;
        for (const auto& c : p.value("/status/conditions"_json_pointer, json::array()))
          if (c.value("type", "") == "Ready") ready = c.value("status", "") == "True";
        bool terminating = p.contains("/metadata/deletionTimestamp"_json_pointer);
        endpoints.push_back({{"addresses", {ip}},
                             {"conditions",
                              {{"ready", ready && !terminating}, {"serving", ready}, {"terminating", terminating}}},
                             {"nodeName", p.value("/spec/nodeName"_json_pointer, std::string())},
                             {"targetRef",
                              {{"kind", "Pod"},
                               {"namespace", ns},
                               {"name", p.value("/metadata/name"_json_pointer, std::string())},
                               {"uid", p.value("/metadata/uid"_json_pointer, std::string())}}}});
      }
      json slice = {{"apiVersion", "discovery.k8s.io/v1"},
                    {"kind", "EndpointSlice"},
                    {"metadata",
                     {{"name", slice_name},
                      {"namespace", ns},
                      {"labels",
                       {{"kubernetes.io/service-name", name},
                        {"endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"}}},
                      {"ownerReferences",
                       {{{"apiVersion", "v1"}, {"kind", "Service"}, {"name", name},
                         {"uid", svc.value("/metadata/uid"_json_pointer, std::string())}, {"controller", true},
                         {"blockOwnerDeletion", true}}}}}},
                    {"addressType", family},
                    {"endpoints", endpoints},
                    {"ports", ports}};
      auto it = slices.find(slice_key);
      if (it != slices.end()) {
        json cur = json::parse(it->second->json, nullptr, false);
        if (!cur.is_discarded() && cur["endpoints"] == slice["endpoints"] && cur["ports"] == slice["ports"] &&
            cur.value("addressType", "") == family)
          continue;
        if (!cur.is_discarded()) {
          slice["metadata"]["uid"] = cur["metadata"].value("uid", "");
          slice["metadata"]["creationTimestamp"] = cur["metadata"].value("creationTimestamp", "");
        }
      } else {
        defaultLocked(KubeResource::kEndpointSlices, slice, nullptr);
      }
      slice["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
      storeLocked(KubeResource::kEndpointSlices, slice_key, slice.dump(), "MODIFIED");
    }
  }
  std::vector<std::string> stale;
  for (const auto& [k, s] : slices) {
    if (wanted.count(k)) continue;
    if (s->json.find("endpointslice-controller.k8s.io") != std::string::npos) stale.push_back(k);
  }
  for (const auto& k : stale) eraseLocked(KubeResource::kEndpointSlices, k);
}

void FakeKubeApiServer::reconcileLocked() {
  scheduleLocked();
  syncEndpointSlicesLocked();
  reconciled_ = rv_;
}

void FakeKubeApiServer::controllerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait(lock, [&] { return stopping_ || rv_ != reconciled_; });
    if (stopping_) return;
    reconcileLocked();
  }
}

void FakeKubeApiServer::loadScale(const FakeKubeScale& s) {
  // Text is generated directly (no JSON DOM): 265,000 objects in well under a second.
  std::map<std::string, StoredPtr> fresh[kKubeResourceCount];
  uint64_t rv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rv = rv_;
  }
  std::vector<char> buf(8192);
  auto put = [&](int r, const std::string& k, int n) {
    fresh[r].emplace_hint(fresh[r].end(), k, std::make_shared<Stored>(Stored{std::string(buf.data(), n), rv}));
  };
  char k[128];
  auto nodeName = [](uint32_t i, char* out) { snprintf(out, 32, "node-%05u", i); };
  auto podIp = [](uint32_t node, uint32_t j, char* out) {
    snprintf(out, 32, "10.%u.%u.%u", 128 + node / 256, node % 256, j + 2);
  };
  for (uint32_t i = 0; i < s.namespaces; ++i) {
    ++rv;
    int n = snprintf(buf.data(), buf.size(),
                     "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"ns-%03u\",\"uid\":"
                     "\"4e5f6071-0000-4000-8000-%012u\",\"resourceVersion\":\"%llu\",\"labels\":{\"kubernetes.io/"
                     "metadata.name\":\"ns-%03u\"}},\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":"
                     "\"Active\"}}",
                     i, i, static_cast<unsigned long long>(rv), i);
    snprintf(k, sizeof k, "ns-%03u", i);
    put(static_cast<int>(KubeResource::kNamespaces), k, n);
  }
  for (uint32_t i = 0; i < s.nodes; ++i) {
    char name[32];
    nodeName(i, name);
    ++rv;
    int n = snprintf(buf.data(), buf.size(),
                     "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\",\"uid\":\"6f1c0b3e-0000-4000-"
                     "8000-%012u\",\"resourceVersion\":\"%llu\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                     "\"labels\":{\"kubernetes.io/hostname\":\"%s\",\"kubernetes.io/os\":\"linux\",\"topology."
                     "kubernetes.io/zone\":\"zone-%u\"},\"annotations\":{\"dpu-cni.io/tunnel-ip\":\"100.64.%u.%u\","
                     "\"node.alpha.kubernetes.io/ttl\":\"0\"}},\"spec\":{\"podCIDR\":\"10.%u.%u.0/24\",\"podCIDRs\":["
                     "\"10.%u.%u.0/24\"]},\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.168.%"
                     "u.%u\"},{\"type\":\"Hostname\",\"address\":\"%s\"}],\"conditions\":[{\"type\":\"Ready\","
                     "\"status\":\"True\"}]}}",
                     name, i, static_cast<unsigned long long>(rv), name, i % 3, i / 256, i % 256, 128 + i / 256,
                     i % 256, 128 + i / 256, i % 256, i / 256, i % 256, name);
    put(0, name, n);
  }
  uint32_t total_pods = s.nodes * s.pods_per_node;
  auto podNs = [&](uint32_t p) { return p % std::max(1u, s.namespaces); };
  for (uint32_t p = 0; p < total_pods; ++p) {
    uint32_t node = p / s.pods_per_node, j = p % s.pods_per_node;
    char ip[32], nn[32];
    podIp(node, j, ip);
    nodeName(node, nn);
    ++rv;
    int n = snprintf(buf.data(), buf.size(),
                     "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"app-%u-%06u\",\"namespace\":"
                     "\"ns-%03u\",\"uid\":\"0a4e5b2c-0000-4000-8000-%012u\",\"resourceVersion\":\"%llu\","
                     "\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"app-%u\",\"pod-template-"
                     "hash\":\"7d4b9c%04u\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                     "\"name\":\"app-%u-7d4b9c\",\"uid\":\"1b2c3d4e-0000-4000-8000-%012u\",\"controller\":true}]},"
                     "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/"
                     "app:1.0\",\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}]}],\"restartPolicy\":"
                     "\"Always\",\"serviceAccountName\":\"default\"},\"status\":{\"phase\":\"Running\",\"hostIP\":"
                     "\"192.168.%u.%u\",\"podIP\":\"%s\",\"podIPs\":[{\"ip\":\"%s\"}],\"startTime\":\"2026-01-"
                     "01T00:00:00Z\"}}",
                     p % 1000, p, podNs(p), p, static_cast<unsigned long long>(rv), p % 1000, p % 10000, p % 1000, p,
                     nn, node / 256, node % 256, ip, ip);
    snprintf(k, sizeof k, "ns-%03u/app-%u-%06u", podNs(p), p % 1000, p);
    put(1, k, n);
  }
  for (uint32_t v = 0; v < s.services; ++v) {
    uint32_t ns = v % std::max(1u, s.namespaces);
    ++rv;
    int n = snprintf(buf.data(), buf.size(),
                     "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"svc-%05u\",\"namespace\":"
                     "\"ns-%03u\",\"uid\":\"2c3d4e5f-0000-4000-8000-%012u\",\"resourceVersion\":\"%llu\"},\"spec\":{"
                     "\"type\":\"ClusterIP\",\"selector\":{\"app\":\"app-%u\"},\"clusterIP\":\"10.96.%u.%u\","
                     "\"clusterIPs\":[\"10.96.%u.%u\"],\"ipFamilies\":[\"IPv4\"],\"ports\":[{\"name\":\"http\","
                     "\"protocol\":\"TCP\",\"port\":80,\"targetPort\":8080}],\"sessionAffinity\":\"None\"}}",
                     v, ns, v, static_cast<unsigned long long>(rv), v % 1000, v / 256, v % 256, v / 256, v % 256);
    snprintf(k, sizeof k, "ns-%03u/svc-%05u", ns, v);
    put(2, k, n);
    // Its EndpointSlice.
    ++rv;
    std::string eps;
    for (uint32_t e = 0; e < s.endpoints_per_service && total_pods > 0; ++e) {
      uint32_t p = (v * s.endpoints_per_service + e) % total_pods;
      uint32_t node = p / s.pods_per_node;
      char ip[32], nn[32], one[512];
      podIp(node, p % s.pods_per_node, ip);
      nodeName(node, nn);
      int m = snprintf(one, sizeof one,
                       "%s{\"addresses\":[\"%s\"],\"conditions\":{\"ready\":true,\"serving\":true,\"terminating\":"
                       "false},\"nodeName\":\"%s\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"ns-%03u\","
                       "\"name\":\"app-%u-%06u\",\"uid\":\"0a4e5b2c-0000-4000-8000-%012u\"}}",
                       e ? "," : "", ip, nn, podNs(p), p % 1000, p, p);
      eps.append(one, static_cast<size_t>(m));
    }
    if (buf.size() < eps.size() + 2048) buf.resize(eps.size() + 2048);
    n = snprintf(buf.data(), buf.size(),
                 "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":{\"name\":\"svc-%"
                 "05u-x7k2p\",\"namespace\":\"ns-%03u\",\"uid\":\"3d4e5f60-0000-4000-8000-%012u\",\"resourceVersion\":"
                 "\"%llu\",\"labels\":{\"kubernetes.io/service-name\":\"svc-%05u\",\"endpointslice.kubernetes.io/"
                 "managed-by\":\"endpointslice-controller.k8s.io\"}},\"addressType\":\"IPv4\",\"endpoints\":[%s],"
                 "\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":8080}]}",
                 v, ns, v, static_cast<unsigned long long>(rv), v, eps.c_str());
    snprintf(k, sizeof k, "ns-%03u/svc-%05u-x7k2p", ns, v);
    put(3, k, n);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kKubeResourceCount; ++i) objects_[i].swap(fresh[i]);
  rv_ = rv;
  history_.clear();
  floor_ = rv_;
  snapshots_.clear();
  cv_.notify_all();
}

}  // namespace dpu::fakes
