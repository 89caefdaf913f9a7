// The fake Kubernetes API server: a small HTTP/1.1 server (one thread per
// connection, OpenSSL for TLS) over an in-memory object store with a global
// resourceVersion and an event history. See fake_kube_apiserver.h.
#include "fake_kube_apiserver.h"

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

namespace dpu::fakes {
namespace {

using nlohmann::json;

struct ResourceInfo {
  const char* path;
  const char* list_kind;
  const char* kind;
  const char* api_version;
  const char* control_name;
  bool namespaced;
};

constexpr ResourceInfo kResources[5] = {
    {"/api/v1/nodes", "NodeList", "Node", "v1", "nodes", false},
    {"/api/v1/pods", "PodList", "Pod", "v1", "pods", true},
    {"/api/v1/services", "ServiceList", "Service", "v1", "services", true},
    {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSliceList", "EndpointSlice", "discovery.k8s.io/v1",
     "endpointslices", true},
    {"/apis/networking.k8s.io/v1/networkpolicies", "NetworkPolicyList", "NetworkPolicy", "networking.k8s.io/v1",
     "networkpolicies", true},
};

const ResourceInfo& info(KubeResource r) { return kResources[static_cast<int>(r)]; }

std::optional<KubeResource> resourceByControlName(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kResources[i].control_name) return static_cast<KubeResource>(i);
  return std::nullopt;
}

std::string key(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

std::string statusJson(int code, const std::string& reason, const std::string& message) {
  json j = {{"kind", "Status"},   {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Failure"},
            {"message", message}, {"reason", reason},  {"code", code}};
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
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 410: return "Gone";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    default: return "Error";
  }
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

namespace {

bool respond(FakeKubeApiServer*, int code, const std::string& body, const std::string& content_type,
             const std::function<bool(const std::string&)>& write) {
  std::string head = "HTTP/1.1 " + std::to_string(code) + " " + reasonPhrase(code) +
                     "\r\nContent-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n";
  return write(head + body);
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
  accept_thread_ = std::thread([this] { acceptLoop(); });
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

bool FakeKubeApiServer::handle(Conn& conn, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  auto status = [&](int code, const std::string& reason, const std::string& message) {
    return respond(this, code, statusJson(code, reason, message), "application/json", write);
  };
  if (req.path.rfind("/fake/", 0) == 0) return handleControl(conn, req);
  bool authorized;
  {
    std::lock_guard<std::mutex> lock(mu_);
    authorized = token_.empty() || req.header("authorization") == "Bearer " + token_;
    if (!authorized) stats_.unauthorized++;
  }
  if (!authorized) return status(401, "Unauthorized", "Unauthorized");
  for (int i = 0; i < 5; ++i) {
    auto r = static_cast<KubeResource>(i);
    const std::string base = kResources[i].path;
    if (req.path == base) {
      if (req.method != "GET") return status(405, "MethodNotAllowed", req.method + " is not supported here");
      std::string w = req.param("watch");
      if (w == "true" || w == "1") return handleWatch(conn, r, req);
      return handleList(conn, r, req);
    }
    if (req.path.rfind(base + "/", 0) == 0) {
      std::string rest = req.path.substr(base.size() + 1);
      if (r == KubeResource::kNodes && req.method == "PATCH") return handlePatch(conn, rest, req);
      if (req.method == "GET") {
        std::string ns, name = rest;
        if (kResources[i].namespaced) {
          size_t slash = rest.find('/');
          if (slash != std::string::npos) {
            ns = rest.substr(0, slash);
            name = rest.substr(slash + 1);
          }
        }
        std::lock_guard<std::mutex> lock(mu_);
        auto it = objects_[i].find(key(ns, name));
        if (it == objects_[i].end()) {
          std::string body = statusJson(404, "NotFound", std::string(kResources[i].kind) + " " + rest + " not found");
          return respond(this, 404, body, "application/json", write);
        }
        return respond(this, 200, it->second->json, "application/json", write);
      }
    }
  }
  return status(404, "NotFound", "the fake API server does not serve " + req.method + " " + req.path);
}

bool FakeKubeApiServer::handleList(Conn& conn, KubeResource r, const Request& req) {
  size_t limit = 0;
  if (auto l = req.param("limit"); !l.empty()) limit = std::stoul(l);
  std::string cont = req.param("continue");
  std::shared_ptr<Snapshot> snap;
  size_t offset = 0;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.lists++;
    if (cont.empty()) {
      snap = std::make_shared<Snapshot>();
      snap->rv = rv_;
      snap->items.reserve(objects_[static_cast<int>(r)].size());
      for (const auto& [k, v] : objects_[static_cast<int>(r)]) snap->items.push_back(v);
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
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  if (!snap)
    return respond(this, 410, statusJson(410, "Expired", "The provided continue parameter is too old to display a "
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
  const ResourceInfo& ri = info(r);
  size_t total = 256;
  for (size_t i = offset; i < end; ++i) total += snap->items[i]->json.size() + 1;
  std::string body;
  body.reserve(total);
  body += "{\"kind\":\"";
  body += ri.list_kind;
  body += "\",\"apiVersion\":\"";
  body += ri.api_version;
  body += "\",\"metadata\":{\"resourceVersion\":\"" + std::to_string(snap->rv) + "\"";
  if (!next.empty()) body += ",\"continue\":\"" + next + "\"";
  body += "},\"items\":[";
  for (size_t i = offset; i < end; ++i) {
    if (i != offset) body += ',';
    body += snap->items[i]->json;
  }
  body += "]}";
  return respond(this, 200, body, "application/json", write);
}

bool FakeKubeApiServer::handleWatch(Conn& conn, KubeResource r, const Request& req) {
  std::string rv_param = req.param("resourceVersion");
  bool bookmarks = req.param("allowWatchBookmarks") == "true" || req.param("allowWatchBookmarks") == "1";
  long timeout = 1800;
  if (auto t = req.param("timeoutSeconds"); !t.empty()) timeout = std::stol(t);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  const ResourceInfo& ri = info(r);
  auto gone = [&](uint64_t from) {
    return statusJson(410, "Expired", "too old resource version: " + std::to_string(from) + " (" +
                                          std::to_string(floor_ + 1) + ")");
  };
  std::string initial;
  uint64_t last;
  uint64_t my_drop;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stats_.watches++;
    my_drop = drop_generation_;
    if (rv_param.empty() || rv_param == "0") {
      for (const auto& [k, v] : objects_[static_cast<int>(r)])
        initial += "{\"type\":\"ADDED\",\"object\":" + v->json + "}\n";
      last = rv_;
    } else {
      last = std::strtoull(rv_param.c_str(), nullptr, 10);
      if (last < floor_) {
        std::string body = gone(last);
        lock.unlock();
        if (options_.gone_as_status)
          return respond(this, 410, body, "application/json", [&conn](const std::string& s) { return conn.write(s); });
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
          if (it->resource != r) continue;
          out += "{\"type\":\"";
          out += it->type;
          out += "\",\"object\":";
          out += it->object->json;
          out += "}\n";
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
                       "\",\"apiVersion\":\"" + ri.api_version + "\",\"metadata\":{\"resourceVersion\":\"" +
                       std::to_string(last) + "\"}}}\n";
      if (!conn.chunk(bm)) return false;
      next_bookmark = now + interval;
    }
    if (now >= deadline) return conn.write("0\r\n\r\n");
  }
}

bool FakeKubeApiServer::handlePatch(Conn& conn, const std::string& name, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  std::string ct = req.header("content-type");
  bool merge = ct.rfind("application/merge-patch+json", 0) == 0 ||
               ct.rfind("application/strategic-merge-patch+json", 0) == 0;
  if (!merge)
    return respond(this, 415, statusJson(415, "UnsupportedMediaType", "the content type '" + ct + "' is not supported"),
                   "application/json", write);
  json patch = json::parse(req.body, nullptr, false);
  if (patch.is_discarded() || !patch.is_object())
    return respond(this, 400, statusJson(400, "BadRequest", "the patch is not a JSON object"), "application/json",
                   write);
  std::string body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.patches++;
    stats_.last_patch_content_type = ct;
    auto& store = objects_[static_cast<int>(KubeResource::kNodes)];
    auto it = store.find(name);
    if (it == store.end()) {
      body = statusJson(404, "NotFound", "nodes \"" + name + "\" not found");
    } else {
      json obj = json::parse(it->second->json, nullptr, false);
      if (obj.is_discarded()) obj = json::object();
      obj.merge_patch(patch);
      obj["metadata"]["name"] = name;
      obj["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
      storeLocked(KubeResource::kNodes, name, obj.dump(), "MODIFIED");
      body = obj.dump();
    }
  }
  int code = body.find("\"kind\":\"Status\"") != std::string::npos ? 404 : 200;
  return respond(this, code, body, "application/json", write);
}

bool FakeKubeApiServer::handleControl(Conn& conn, const Request& req) {
  auto write = [&conn](const std::string& s) { return conn.write(s); };
  auto ok = [&](const json& j) { return respond(this, 200, j.dump(), "application/json", write); };
  auto bad = [&](int code, const std::string& m) {
    return respond(this, code, statusJson(code, "BadRequest", m), "application/json", write);
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
               {"openWatches", s.open_watches},
               {"resourceVersion", resourceVersion()}});
  }
  if (p.rfind("/fake/objects/", 0) == 0) {
    std::string rest = p.substr(strlen("/fake/objects/"));
    std::string rname = rest.substr(0, rest.find('/'));
    auto r = resourceByControlName(rname);
    if (!r) return bad(404, "no resource " + rname);
    if (req.method == "PUT" || req.method == "POST") {
      json obj = json::parse(req.body, nullptr, false);
      if (obj.is_discarded()) return bad(400, "the body is not JSON");
      // When the change happened, on CLOCK_MONOTONIC (steady_clock), which
      // another process can compare with its own clock readings.
      auto applied_at = std::chrono::steady_clock::now().time_since_epoch();
      auto rv = apply(*r, std::move(obj));
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
      if (!remove(*r, ns, name)) return bad(404, "no such object");
      return ok(json::object());
    }
  }
  return bad(404, "no control endpoint " + req.method + " " + p);
}

void FakeKubeApiServer::recordLocked(KubeResource r, const char* type, StoredPtr obj) {
  history_.push_back(Event{obj->rv, r, type, std::move(obj)});
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
  slot = stored;
  recordLocked(r, type, stored);
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
  object["apiVersion"] = info(r).api_version;
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
  auto it = store.find(key(ns, name));
  if (it == store.end()) return false;
  // The DELETED event carries the object's last state at the deletion's version.
  json obj = json::parse(it->second->json, nullptr, false);
  uint64_t rv = ++rv_;
  std::string text = it->second->json;
  if (obj.is_object()) {
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    text = obj.dump();
  }
  store.erase(it);
  recordLocked(r, "DELETED", std::make_shared<Stored>(Stored{std::move(text), rv}));
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

void FakeKubeApiServer::loadScale(const FakeKubeScale& s) {
  // Text is generated directly (no JSON DOM): 265,000 objects in well under a second.
  std::map<std::string, StoredPtr> fresh[5];
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
  std::vector<std::pair<std::string, std::string>> node_keys;
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
  for (int i = 0; i < 5; ++i) objects_[i].swap(fresh[i]);
  rv_ = rv;
  history_.clear();
  floor_ = rv_;
  snapshots_.clear();
  cv_.notify_all();
}

}  // namespace dpu::fakes
