// Kubernetes ClusterSource: the reflector loop per resource, the dispatcher
// that serializes listener callbacks, and the node patch. See kube_source.h.
#include "control/kube_source.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <streambuf>
#include <thread>
#include <unordered_map>

#include <boost/asio/ssl.hpp>
#include <cpprest/http_client.h>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/net_address.h"
#include "control/kube_objects.h"

namespace dpu::control {
namespace {

namespace http = web::http;
using web::http::client::http_client;
using web::http::client::http_client_config;

constexpr const char* kLog = "kube";
// No Kubernetes object comes near this (etcd refuses values over 1.5 MiB); a
// longer line is a broken stream, not something to buffer.
constexpr size_t kMaxEventLine = 16u << 20;

const char* resourcePath(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "/api/v1/nodes";
    case ObjectKind::kPod: return "/api/v1/pods";
    case ObjectKind::kService: return "/api/v1/services";
    case ObjectKind::kEndpointSlice: return "/apis/discovery.k8s.io/v1/endpointslices";
    case ObjectKind::kNetworkPolicy: return "/apis/networking.k8s.io/v1/networkpolicies";
  }
  return "/";
}

// A std::streambuf over a cpprestsdk response body that hands out whatever has
// arrived instead of waiting for a full buffer (producer_consumer_buffer::getn
// waits for `count` bytes, which would stall a watch stream until 64 KiB of
// events pile up).
class BodyStreamBuf : public std::streambuf {
 public:
  explicit BodyStreamBuf(const concurrency::streams::istream& body) : body_(body.streambuf()) {}

  // Blocks until at least one byte arrived; 0 at the end of the body or on error.
  size_t readSome(char* dst, size_t cap) {
    try {
      size_t avail = body_.in_avail();
      size_t want = avail == 0 ? 1 : std::min(avail, cap);
      return body_.getn(reinterpret_cast<uint8_t*>(dst), want).get();
    } catch (const std::exception& e) {
      error_ = e.what();
      return 0;
    }
  }
  const std::string& error() const { return error_; }

  // Reads until `n` bytes (or the whole body, if shorter) are buffered and
  // returns them without consuming them.
  std::string_view peek(size_t n) {
    n = std::min(n, sizeof buf_);
    size_t have = static_cast<size_t>(egptr() - gptr());
    if (have == 0) {
      setg(buf_, buf_, buf_);
    } else if (gptr() != buf_) {
      std::memmove(buf_, gptr(), have);
      setg(buf_, buf_, buf_ + have);
    }
    while (have < n) {
      size_t got = readSome(buf_ + have, n - have);
      if (got == 0) break;
      have += got;
      setg(buf_, buf_, buf_ + have);
    }
    return std::string_view(buf_, have);
  }

 protected:
  int_type underflow() override {
    size_t n = readSome(buf_, sizeof buf_);
    if (n == 0) return traits_type::eof();
    setg(buf_, buf_, buf_ + n);
    return traits_type::to_int_type(buf_[0]);
  }

 private:
  concurrency::streams::streambuf<uint8_t> body_;
  char buf_[64 * 1024];
  std::string error_;
};

// A request in flight that may be given up (a prefetched page whose token
// turned out wrong, or a list abandoned on error or stop). pplx terminates the
// process when a failed task's exception is never observed, so an abandoned
// one gets a continuation that observes it.
class PendingResponse {
 public:
  PendingResponse() = default;
  PendingResponse(const PendingResponse&) = delete;
  PendingResponse& operator=(const PendingResponse&) = delete;
  ~PendingResponse() { abandon(); }

  void set(pplx::task<http::http_response> task) {
    abandon();
    task_ = std::move(task);
    live_ = true;
  }
  // Hands the task over to be waited on.
  pplx::task<http::http_response>& take() {
    live_ = false;
    return task_;
  }
  void abandon() {
    if (!live_) return;
    live_ = false;
    task_.then([](pplx::task<http::http_response> t) {
      try {
        t.get();
      } catch (...) {
      }
    });
  }

 private:
  pplx::task<http::http_response> task_;
  bool live_ = false;
};

// What the dispatcher hands to the listener.
struct Delivery {
  enum class Op : uint8_t { kUpsert, kDelete, kListed };
  Op op = Op::kUpsert;
  ObjectKind kind = ObjectKind::kNode;
  KubeObject object;  // upsert: the object; delete: ns and name
};

std::string objectKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

class KubeSource final : public ClusterSource {
 public:
  KubeSource(KubeSourceConfig config, KubeConnection connection)
      : config_(std::move(config)), conn_(std::move(connection)), token_(conn_, config_.token_reread) {
    client_ = makeClient(config_.request_timeout);
    // A watch is idle between events; the inactivity timeout must outlast
    // timeoutSeconds so the server, not us, ends a quiet stream.
    watch_client_ = makeClient(config_.watch_timeout + std::chrono::seconds(30));
  }

  ~KubeSource() override { stop(); }

  Result<void> start(ClusterListener& listener) override {
    std::lock_guard<std::mutex> lock(lifecycle_);
    if (started_) return Error{"the Kubernetes source is already started"};
    started_ = true;
    listener_ = &listener;
    for (ObjectKind k : config_.resources) all_mask_ |= 1u << static_cast<unsigned>(k);
    dispatcher_ = std::thread([this] { dispatch(); });
    for (ObjectKind k : config_.resources) workers_.emplace_back([this, k] { reflect(k); });
    DPU_LOG(kInfo, kLog) << "syncing from " << conn_.server << " (" << conn_.origin << ")";
    return {};
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(lifecycle_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    stopping_ = true;
    cts_.cancel();
    {
      std::lock_guard<std::mutex> q(queue_mu_);
      queue_cv_.notify_all();
      space_cv_.notify_all();
    }
    {
      std::lock_guard<std::mutex> s(sleep_mu_);
      sleep_cv_.notify_all();
    }
    for (auto& t : workers_) t.join();
    workers_.clear();
    if (dispatcher_.joinable()) dispatcher_.join();
  }

  Result<void> publishSelf(const SelfEntry& self) override {
    std::string node = self.node_name.empty() ? config_.node_name : self.node_name;
    if (node.empty()) return Error{"publishSelf: no node name; set node_name in the Kubernetes source config"};
    if (self.tunnel_ip.empty()) return Error{"publishSelf: no tunnel IP to publish for node " + node};
    if (!IpAddress::parse(self.tunnel_ip).ok())
      return Error{"publishSelf: tunnel IP '" + self.tunnel_ip + "' is not an IP address"};
    nlohmann::json annotations = {{kTunnelIpAnnotation, self.tunnel_ip}};
    // The key and its epoch together, or neither (null deletes them): a node
    // with IPsec off, or whose key is not installed yet, names no key.
    const bool keyed = !self.ipsec_public_key.empty();
    annotations[kIpsecPublicKeyAnnotation] = keyed ? nlohmann::json(self.ipsec_public_key) : nlohmann::json();
    annotations[kIpsecEpochAnnotation] = keyed ? nlohmann::json(std::to_string(self.ipsec_epoch)) : nlohmann::json();
    // Always written, empty too: a node whose last pod went must not keep
    // naming it to the others.
    annotations[kPortKeysAnnotation] = formatPortKeysAnnotation(self.port_keys);
    nlohmann::json patch = {{"metadata", {{"annotations", annotations}}}};
    std::string path = std::string("/api/v1/nodes/") + web::uri::encode_data_string(node);
    auto resp = send(*client_, http::methods::PATCH, path, patch.dump(), "application/merge-patch+json");
    if (!resp.ok()) return prefixed("patching Node " + node, std::move(resp).takeError());
    auto code = resp->status_code();
    std::string body;
    try {
      body = resp->extract_utf8string(true).get();
    } catch (const std::exception&) {
    }
    if (code == http::status_codes::NotFound)
      return Error{"patching Node " + node + ": the API server has no such Node; check node_name"};
    if (code < 200 || code >= 300) return Error{"patching Node " + node + ": " + httpError(code, body)};
    // Said once; later patches follow attaches and detaches (their port keys).
    if (published_.exchange(true)) {
      DPU_LOG(kDebug, kLog) << "published " << self.port_keys.size() << " port keys on Node " << node;
    } else {
      DPU_LOG(kInfo, kLog) << "published " << kTunnelIpAnnotation << "=" << self.tunnel_ip << " on Node " << node;
    }
    return {};
  }

  ClusterSourceStats stats() const override {
    ClusterSourceStats s;
    s.malformed = malformed_.load();
    s.watch_restarts = watch_restarts_.load();
    s.relists = relists_.load();
    s.events = events_.load();
    for (size_t i = 0; i < kObjectKindCount; ++i) s.events_by_kind[i] = events_by_kind_[i].load();
    s.synced = synced_.load();
    std::lock_guard<std::mutex> lock(error_mu_);
    s.last_error = last_error_;
    return s;
  }

  std::string kind() const override { return "kubernetes"; }

 private:
  struct IndexEntry {
    uint64_t fingerprint = 0;
    uint32_t generation = 0;
  };
  using Index = std::unordered_map<std::string, IndexEntry>;

  enum class WatchEnd { kEnded, kGone, kFailed };

  std::unique_ptr<http_client> makeClient(std::chrono::seconds timeout) {
    http_client_config cfg;
    cfg.set_timeout(timeout);
    cfg.set_validate_certificates(!conn_.insecure_skip_tls_verify);
    std::string ca = conn_.ca_pem, cert = conn_.client_cert_pem, key = conn_.client_key_pem;
    cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
      if (!ca.empty()) ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()));
      if (!cert.empty()) {
        ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
        ctx.use_private_key(boost::asio::buffer(key.data(), key.size()), boost::asio::ssl::context::pem);
      }
    });
    return std::make_unique<http_client>(web::uri(conn_.server), cfg);
  }

  static std::string httpError(int code, const std::string& body) {
    KubeStatus st = parseKubeStatus(body);
    std::string s = "HTTP " + std::to_string(code);
    if (!st.reason.empty()) s += " " + st.reason;
    if (!st.message.empty()) s += ": " + st.message;
    if (code == 401) s += " (the bearer token was refused; check the service-account token or kubeconfig user)";
    if (code == 403) s += " (RBAC: the agent's ClusterRole must allow list/watch on this resource)";
    return s;
  }

  http::http_request makeRequest(const http::method& method, const std::string& path, const std::string& body = "",
                                 const std::string& content_type = "") {
    http::http_request req(method);
    req.set_request_uri(web::uri(path));
    std::string terr;
    std::string tok = token_.token(&terr);
    if (!terr.empty()) recordError("re-reading the token: " + terr);
    if (!tok.empty()) req.headers().add(http::header_names::authorization, "Bearer " + tok);
    req.headers().add(http::header_names::accept, "application/json");
    if (!content_type.empty()) {
      // A byte vector, not a string: set_body(std::string) reinterprets a char
      // stream buffer as a uint8_t one inside cpprestsdk, which UBSan rejects.
      // The Content-Type set first is kept.
      req.headers().add(http::header_names::content_type, content_type);
      req.set_body(std::vector<unsigned char>(body.begin(), body.end()));
    }
    return req;
  }

  Result<http::http_response> await(pplx::task<http::http_response>& task, const std::string& path) {
    try {
      auto resp = task.get();
      if (resp.status_code() == http::status_codes::Unauthorized) token_.invalidate();
      return resp;
    } catch (const std::exception& e) {
      return Error{conn_.server + path + ": " + e.what()};
    }
  }

  Result<http::http_response> send(http_client& client, const http::method& method, const std::string& path,
                                   const std::string& body = "", const std::string& content_type = "") {
    pplx::task<http::http_response> task;
    try {
      task = client.request(makeRequest(method, path, body, content_type), cts_.get_token());
    } catch (const std::exception& e) {
      return Error{conn_.server + path + ": " + e.what()};
    }
    return await(task, path);
  }

  void recordError(const std::string& e) {
    std::lock_guard<std::mutex> lock(error_mu_);
    last_error_ = e;
  }

  // Sleeps unless stopping; false when stopping.
  bool sleepFor(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(sleep_mu_);
    return !sleep_cv_.wait_for(lock, d, [this] { return stopping_.load(); });
  }

  // Full jitter over an exponentially growing ceiling, never below half of it,
  // so a fleet of agents does not stampede a recovering API server.
  std::chrono::milliseconds backoff(int failures, std::mt19937_64& rng) {
    double ceiling = static_cast<double>(config_.backoff_initial.count());
    for (int i = 0; i < failures && ceiling < static_cast<double>(config_.backoff_max.count()); ++i) ceiling *= 2;
    ceiling = std::min(ceiling, static_cast<double>(config_.backoff_max.count()));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    return std::chrono::milliseconds(static_cast<int64_t>(ceiling * jitter(rng)));
  }

  void enqueue(std::vector<Delivery>& batch) {
    if (batch.empty()) return;
    std::unique_lock<std::mutex> lock(queue_mu_);
    space_cv_.wait(lock, [&] { return stopping_ || queue_.size() < config_.max_pending; });
    for (auto& d : batch) queue_.push_back(std::move(d));
    batch.clear();
    queue_cv_.notify_one();
  }

  // A single watch event. When nothing is queued and the dispatcher is idle,
  // the watch thread delivers it itself: one thread wake-up less between the
  // API server and the listener. `delivering_` keeps callbacks serialized and
  // in order (nothing of this resource can be queued ahead of it).
  void enqueueOne(Delivery&& d) {
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (queue_.empty() && !delivering_ && !stopping_) {
      delivering_ = true;
      lock.unlock();
      deliver(d, listed_);
      lock.lock();
      delivering_ = false;
      if (!queue_.empty()) queue_cv_.notify_one();
      return;
    }
    lock.unlock();
    std::vector<Delivery> one;
    one.push_back(std::move(d));
    enqueue(one);
  }

  void dispatch() {
    std::vector<Delivery> work;
    bool mine = false;  // this thread holds delivering_
    while (true) {
      {
        std::unique_lock<std::mutex> lock(queue_mu_);
        if (mine) delivering_ = false;
        mine = false;
        queue_cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !delivering_); });
        if (stopping_) return;
        delivering_ = mine = true;
        size_t n = std::min<size_t>(queue_.size(), 1024);
        for (size_t i = 0; i < n; ++i) {
          work.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        space_cv_.notify_all();
      }
      for (auto& d : work) {
        if (stopping_) return;
        deliver(d, listed_);
      }
      work.clear();
    }
  }

  void deliver(Delivery& d, uint32_t& listed) {
    ClusterListener& l = *listener_;
    const KubeObject& o = d.object;
    if (d.op == Delivery::Op::kListed) {
      listed |= 1u << static_cast<unsigned>(d.kind);
      if ((listed & all_mask_) == all_mask_) {
        synced_ = true;
        l.synced();
      }
      return;
    }
    events_++;
    events_by_kind_[static_cast<size_t>(d.kind)]++;
    if (d.op == Delivery::Op::kDelete) {
      switch (d.kind) {
        case ObjectKind::kNode: l.nodeDeleted(o.name); break;
        case ObjectKind::kPod: l.podDeleted(o.ns, o.name); break;
        case ObjectKind::kService: l.serviceDeleted(o.ns, o.name); break;
        case ObjectKind::kEndpointSlice: l.endpointSliceDeleted(o.ns, o.name); break;
        case ObjectKind::kNetworkPolicy: l.networkPolicyDeleted(o.ns, o.name); break;
      }
      return;
    }
    switch (d.kind) {
      case ObjectKind::kNode: l.nodeUpserted(std::get<NodeInfo>(o.info)); break;
      case ObjectKind::kPod: l.podUpserted(std::get<PodInfo>(o.info)); break;
      case ObjectKind::kService: l.serviceUpserted(std::get<ServiceInfo>(o.info)); break;
      case ObjectKind::kEndpointSlice: l.endpointSliceUpserted(std::get<EndpointSliceInfo>(o.info)); break;
      case ObjectKind::kNetworkPolicy: l.networkPolicyUpserted(std::get<NetworkPolicyInfo>(o.info)); break;
    }
  }

  void countMalformed(const KubeObject& o) {
    malformed_++;
    DPU_LOG(kWarn, kLog) << "skipping malformed " << o.describe() << ": " << o.error;
  }

  // One resource's reflector: list, then watch until the stream ends; relist on
  // 410 Gone; back off on failures.
  void reflect(ObjectKind kind) {
    std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(kind));
    Index index;
    std::string rv;
    uint32_t generation = 0;
    int failures = 0;
    bool need_list = true;
    bool listed_once = false;
    auto listed_at = std::chrono::steady_clock::now();
    while (!stopping_) {
      if (need_list) {
        auto listed = list(kind, index, ++generation);
        if (!listed.ok()) {
          if (stopping_) return;
          recordError(listed.error());
          DPU_LOG(kWarn, kLog) << listed.error();
          if (!sleepFor(backoff(failures++, rng))) return;
          continue;
        }
        rv = *listed;
        listed_at = std::chrono::steady_clock::now();
        need_list = false;
        failures = 0;
        if (listed_once) relists_++;
        listed_once = true;
        enqueueOne(Delivery{Delivery::Op::kListed, kind, {}});
      }
      auto started = std::chrono::steady_clock::now();
      uint64_t delivered = 0;
      std::string error;
      WatchEnd end = watch(kind, index, rv, delivered, error);
      if (stopping_) return;
      watch_restarts_++;
      if (config_.relist_period.count() > 0 && end != WatchEnd::kFailed &&
          std::chrono::steady_clock::now() - listed_at >= config_.relist_period) {
        need_list = true;
        continue;
      }
      if (end == WatchEnd::kGone) {
        DPU_LOG(kInfo, kLog) << kubeKindName(kind) << " watch: resourceVersion " << rv
                             << " is too old (410 Gone); relisting";
        need_list = true;
        continue;
      }
      if (end == WatchEnd::kFailed) {
        recordError(error);
        DPU_LOG(kWarn, kLog) << error;
        if (!sleepFor(backoff(failures++, rng))) return;
        continue;
      }
      // A stream that ends at once with nothing in it is a failure in disguise
      // (a proxy closing idle streams); do not spin on it.
      if (delivered == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
        if (!sleepFor(backoff(failures++, rng))) return;
      } else {
        failures = 0;
      }
    }
  }

  // The continue token of a list page, read from the page's first bytes (the
  // API server writes metadata before items) so the next page can be
  // requested while this one is decoded. Checked against the decoded token.
  static std::string peekContinue(std::string_view head) {
    static const std::string kKey = "\"continue\":\"";
    size_t items = head.find("\"items\"");
    size_t at = head.find(kKey);
    if (at == std::string_view::npos || (items != std::string_view::npos && items < at)) return {};
    size_t start = at + kKey.size();
    size_t end = head.find('"', start);
    if (end == std::string_view::npos) return {};
    std::string token(head.substr(start, end - start));
    if (token.find('\\') != std::string::npos) return {};  // escaped: leave it to the decoder
    return token;
  }

  std::string listPath(ObjectKind kind, const std::string& cont) {
    std::string path = std::string(resourcePath(kind)) + "?limit=" + std::to_string(config_.page_size);
    if (!cont.empty()) path += "&continue=" + web::uri::encode_data_string(cont);
    return path;
  }

  // Lists every page and delivers what differs from `index`; returns the
  // list's resourceVersion. Pages are pipelined: page N+1 is in flight while
  // page N is decoded.
  Result<std::string> list(ObjectKind kind, Index& index, uint32_t generation) {
    std::string list_rv;
    std::vector<Delivery> batch;
    batch.reserve(256);
    int expired = 0;
    std::string what = std::string("listing ") + kubeKindName(kind) + "s from " + conn_.server;
    PendingResponse inflight;
    auto fetch = [&](const std::string& cont) {
      try {
        inflight.set(client_->request(makeRequest(http::methods::GET, listPath(kind, cont)), cts_.get_token()));
      } catch (...) {
        inflight.set(pplx::task_from_exception<http::http_response>(std::current_exception()));
      }
    };
    std::string cont;
    fetch(cont);
    while (!stopping_) {
      auto resp = await(inflight.take(), listPath(kind, cont));
      if (!resp.ok()) return Error{what + ": " + resp.error()};
      int code = resp->status_code();
      if (code < 200 || code >= 300) {
        std::string body;
        try {
          body = resp->extract_utf8string(true).get();
        } catch (const std::exception&) {
        }
        if (code == http::status_codes::Gone && !cont.empty() && expired++ < 3) {
          // The continue token expired (its snapshot was compacted): start over.
          cont.clear();
          fetch(cont);
          continue;
        }
        return Error{what + ": " + httpError(code, body)};
      }
      // Decoded while it streams in; the next page is requested as soon as
      // its continue token is seen in the first bytes.
      BodyStreamBuf buf(resp->body());
      std::string prefetched = peekContinue(buf.peek(4096));
      if (!prefetched.empty()) fetch(prefetched);
      std::istream text(&buf);
      auto page = parseKubeList(kind, text, [&](KubeObject&& o) {
        std::string key = objectKey(o.ns, o.name);
        if (!o.ok()) {
          countMalformed(o);
          // Keep the last good version of a known object rather than delete it.
          if (auto it = index.find(key); it != index.end()) it->second.generation = generation;
          return;
        }
        uint64_t fp = kubeFingerprint(o);
        auto [it, inserted] = index.try_emplace(std::move(key));
        it->second.generation = generation;
        if (!inserted && it->second.fingerprint == fp) return;
        it->second.fingerprint = fp;
        batch.push_back(Delivery{Delivery::Op::kUpsert, kind, std::move(o)});
        if (batch.size() >= 256) enqueue(batch);
      });
      enqueue(batch);
      if (!page.ok()) return Error{what + ": " + (buf.error().empty() ? page.error() : buf.error())};
      if (list_rv.empty()) list_rv = page->resource_version;
      cont = page->continue_token;
      if (cont.empty()) break;
      if (cont != prefetched) fetch(cont);
    }
    if (stopping_) return Error{"stopping"};
    for (auto it = index.begin(); it != index.end();) {
      if (it->second.generation == generation) {
        ++it;
        continue;
      }
      Delivery d{Delivery::Op::kDelete, kind, {}};
      splitKey(kind, it->first, d.object);
      batch.push_back(std::move(d));
      it = index.erase(it);
    }
    enqueue(batch);
    if (list_rv.empty()) return Error{std::string("the ") + kubeKindName(kind) + " list has no resourceVersion"};
    return list_rv;
  }

  static void splitKey(ObjectKind kind, const std::string& key, KubeObject& o) {
    o.kind = kind;
    auto slash = key.find('/');
    if (kind == ObjectKind::kNode || slash == std::string::npos) {
      o.name = key;
    } else {
      o.ns = key.substr(0, slash);
      o.name = key.substr(slash + 1);
    }
  }

  WatchEnd watch(ObjectKind kind, Index& index, std::string& rv, uint64_t& delivered, std::string& error) {
    std::string path = std::string(resourcePath(kind)) + "?watch=true&allowWatchBookmarks=true&resourceVersion=" +
                       web::uri::encode_data_string(rv) +
                       "&timeoutSeconds=" + std::to_string(config_.watch_timeout.count());
    auto resp = send(*watch_client_, http::methods::GET, path);
    std::string what = std::string("watching ") + kubeKindName(kind) + "s";
    if (!resp.ok()) {
      error = what + ": " + resp.error();
      return WatchEnd::kFailed;
    }
    int code = resp->status_code();
    if (code == http::status_codes::Gone) return WatchEnd::kGone;
    if (code < 200 || code >= 300) {
      std::string body;
      try {
        body = resp->extract_utf8string(true).get();
      } catch (const std::exception&) {
      }
      error = what + " from " + conn_.server + ": " + httpError(code, body);
      return WatchEnd::kFailed;
    }
    BodyStreamBuf buf(resp->body());
    std::string pending;
    std::vector<char> chunk(64 * 1024);
    while (!stopping_) {
      size_t n = buf.readSome(chunk.data(), chunk.size());
      if (n == 0) break;
      pending.append(chunk.data(), n);
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(pending.data() + start, nl - start);
        if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
        auto ev = parseKubeWatchEvent(kind, line);
        if (!ev.ok()) {
          malformed_++;
          DPU_LOG(kWarn, kLog) << "skipping a bad " << kubeKindName(kind) << " watch event: " << ev.error();
          continue;
        }
        if (ev->type == KubeWatchEvent::Type::kError) {
          if (ev->status.code == 410) return WatchEnd::kGone;
          error = what + ": the API server sent an ERROR event (code " + std::to_string(ev->status.code) +
                  "): " + ev->status.message;
          return WatchEnd::kFailed;
        }
        KubeObject& o = ev->object;
        if (!o.resource_version.empty()) rv = o.resource_version;
        if (ev->type == KubeWatchEvent::Type::kBookmark) continue;
        if (!o.ok()) {
          countMalformed(o);
          continue;
        }
        std::string key = objectKey(o.ns, o.name);
        if (ev->type == KubeWatchEvent::Type::kDeleted) {
          if (index.erase(key) == 0) continue;
          Delivery d{Delivery::Op::kDelete, kind, {}};
          d.object.ns = std::move(o.ns);
          d.object.name = std::move(o.name);
          enqueueOne(std::move(d));
          delivered++;
          continue;
        }
        uint64_t fp = kubeFingerprint(o);
        auto [it, inserted] = index.try_emplace(std::move(key));
        if (!inserted && it->second.fingerprint == fp) continue;
        it->second.fingerprint = fp;
        enqueueOne(Delivery{Delivery::Op::kUpsert, kind, std::move(o)});
        delivered++;
      }
      pending.erase(0, start);
      if (pending.size() > kMaxEventLine) {
        error = what + ": an event line exceeds " + std::to_string(kMaxEventLine >> 20) + " MiB; dropping the stream";
        return WatchEnd::kFailed;
      }
    }
    // Ended cleanly (timeoutSeconds) or dropped: either way resume from rv.
    if (!buf.error().empty() && !stopping_) {
      DPU_LOG(kInfo, kLog) << what << ": stream ended (" << buf.error() << "); resuming from " << rv;
    }
    return WatchEnd::kEnded;
  }

  KubeSourceConfig config_;
  KubeConnection conn_;
  KubeTokenSource token_;
  std::unique_ptr<http_client> client_;
  std::unique_ptr<http_client> watch_client_;
  pplx::cancellation_token_source cts_;

  std::mutex lifecycle_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};
  ClusterListener* listener_ = nullptr;
  uint32_t all_mask_ = 0;
  std::thread dispatcher_;
  std::vector<std::thread> workers_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::condition_variable space_cv_;
  std::deque<Delivery> queue_;
  bool delivering_ = false;  // a thread is calling the listener (under queue_mu_)
  uint32_t listed_ = 0;      // resources listed at least once; touched only while delivering_

  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;

  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> watch_restarts_{0};
  std::atomic<uint64_t> relists_{0};
  std::atomic<uint64_t> events_{0};
  std::array<std::atomic<uint64_t>, kObjectKindCount> events_by_kind_{};
  std::atomic<bool> synced_{false};
  std::atomic<bool> published_{false};
  mutable std::mutex error_mu_;
  std::string last_error_;
};

Result<void> checkConfig(const KubeSourceConfig& c) {
  if (c.resources.empty()) return Error{"kubernetes source: resources is empty; list at least one resource to watch"};
  if (c.page_size < 1 || c.page_size > 10000)
    return Error{"kubernetes source: page_size " + std::to_string(c.page_size) + " is outside 1..10000"};
  if (c.backoff_initial.count() <= 0 || c.backoff_max < c.backoff_initial)
    return Error{"kubernetes source: backoff_initial must be positive and not above backoff_max"};
  if (c.watch_timeout.count() < 1) return Error{"kubernetes source: watch_timeout must be at least 1 s"};
  if (c.request_timeout.count() < 1) return Error{"kubernetes source: request_timeout must be at least 1 s"};
  if (c.max_pending < 1) return Error{"kubernetes source: max_pending must be at least 1"};
  if (c.relist_period.count() < 0) return Error{"kubernetes source: relist_period must not be negative"};
  return {};
}

}  // namespace

Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config,
                                                            const KubeConnection& connection) {
  if (auto ok = checkConfig(config); !ok) return std::move(ok).takeError();
  if (connection.server.rfind("https://", 0) != 0 && connection.server.rfind("http://", 0) != 0)
    return Error{connection.origin + ": server '" + connection.server + "' is not an http:// or https:// URL"};
  // Refuse bad PEM now rather than on every request.
  try {
    boost::asio::ssl::context ctx(boost::asio::ssl::context::tls_client);
    if (!connection.ca_pem.empty())
      ctx.add_certificate_authority(boost::asio::buffer(connection.ca_pem.data(), connection.ca_pem.size()));
    if (!connection.client_cert_pem.empty()) {
      ctx.use_certificate_chain(boost::asio::buffer(connection.client_cert_pem.data(), connection.client_cert_pem.size()));
      ctx.use_private_key(boost::asio::buffer(connection.client_key_pem.data(), connection.client_key_pem.size()),
                          boost::asio::ssl::context::pem);
    }
  } catch (const std::exception& e) {
    return Error{connection.origin + ": the CA or client certificate/key is not valid PEM (" + e.what() + ")"};
  }
  try {
    return std::unique_ptr<ClusterSource>(std::make_unique<KubeSource>(config, connection));
  } catch (const std::exception& e) {
    return Error{"creating the Kubernetes client for " + connection.server + ": " + e.what()};
  }
}

Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config) {
  auto conn = config.kubeconfig.empty() ? loadInClusterConfig(config.in_cluster_dir, config.api_server)
                                        : loadKubeconfig(config.kubeconfig, config.kube_context);
  if (!conn.ok()) return std::move(conn).takeError();
  return makeKubernetesSource(config, *conn);
}

}  // namespace dpu::control
