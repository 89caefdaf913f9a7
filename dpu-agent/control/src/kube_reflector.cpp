// One kind's list+watch loop (see kube_reflector.h).
#include "kube_reflector.h"

#include <istream>

#include "common/log.h"
#include "control/kube_objects.h"

namespace dpu::control::kube {
namespace {

namespace http = web::http;

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
    case ObjectKind::kNamespace: return "/api/v1/namespaces";
  }
  return "/";
}

std::string objectKey(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

void splitKey(ObjectKind kind, const std::string& key, KubeObject& o) {
  o.kind = kind;
  auto slash = key.find('/');
  if (kind == ObjectKind::kNode || kind == ObjectKind::kNamespace || slash == std::string::npos) {
    o.name = key;
  } else {
    o.ns = key.substr(0, slash);
    o.name = key.substr(slash + 1);
  }
}

// The continue token of a list page, read from the page's first bytes (the
// API server writes metadata before items) so the next page can be requested
// while this one is decoded. Checked against the decoded token.
std::string peekContinue(std::string_view head) {
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

}  // namespace

Reflector::Reflector(ReflectorOptions options, Transport& transport, Dispatcher& dispatcher, StopSignal& stop,
                     LastError& errors)
    : options_(options), transport_(transport), dispatcher_(dispatcher), stop_(stop), errors_(errors) {}

void Reflector::start() { thread_ = std::thread([this] { run(); }); }

void Reflector::join() {
  if (thread_.joinable()) thread_.join();
}

std::chrono::milliseconds Reflector::backoff(int failures, std::chrono::milliseconds initial,
                                             std::chrono::milliseconds max, std::mt19937_64& rng) {
  double ceiling = static_cast<double>(initial.count());
  for (int i = 0; i < failures && ceiling < static_cast<double>(max.count()); ++i) ceiling *= 2;
  ceiling = std::min(ceiling, static_cast<double>(max.count()));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(ceiling * jitter(rng)));
}

void Reflector::countMalformed(const KubeObject& o) {
  malformed_++;
  DPU_LOG(kWarn, kLog) << "skipping malformed " << o.describe() << ": " << o.error;
}

void Reflector::fail(const std::string& error) {
  errors_.record(error);
  DPU_LOG(kWarn, kLog) << error;
}

void Reflector::run() {
  const ObjectKind kind = options_.kind;
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(kind));
  auto pause = [&](int& failures) {
    return stop_.sleepFor(backoff(failures++, options_.backoff_initial, options_.backoff_max, rng));
  };
  std::string rv;
  uint32_t generation = 0;
  int failures = 0;
  bool need_list = true;
  bool listed_once = false;
  auto listed_at = std::chrono::steady_clock::now();
  while (!stop_.stopping()) {
    if (need_list) {
      auto listed = list(++generation);
      if (!listed.ok()) {
        if (stop_.stopping()) return;
        fail(listed.error());
        if (!pause(failures)) return;
        continue;
      }
      rv = *listed;
      listed_at = std::chrono::steady_clock::now();
      need_list = false;
      failures = 0;
      if (listed_once) relists_++;
      listed_once = true;
      dispatcher_.enqueueOne(Delivery{Delivery::Op::kListed, kind, {}});
    }
    auto started = std::chrono::steady_clock::now();
    uint64_t delivered = 0;
    std::string error;
    WatchEnd end = watch(rv, delivered, error);
    if (stop_.stopping()) return;
    watch_restarts_++;
    if (options_.relist_period.count() > 0 && end != WatchEnd::kFailed &&
        std::chrono::steady_clock::now() - listed_at >= options_.relist_period) {
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
      fail(error);
      if (!pause(failures)) return;
      continue;
    }
    // A stream that ends at once with nothing in it is a failure in disguise
    // (a proxy closing idle streams); do not spin on it.
    if (delivered == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
      if (!pause(failures)) return;
    } else {
      failures = 0;
    }
  }
}

std::string Reflector::listPath(const std::string& cont) const {
  std::string path = std::string(resourcePath(options_.kind)) + "?limit=" + std::to_string(options_.page_size);
  if (!cont.empty()) path += "&continue=" + web::uri::encode_data_string(cont);
  return path;
}

Result<std::string> Reflector::list(uint32_t generation) {
  const ObjectKind kind = options_.kind;
  std::string list_rv;
  std::vector<Delivery> batch;
  batch.reserve(256);
  int expired = 0;
  std::string what = std::string("listing ") + kubeKindName(kind) + "s from " + transport_.server();
  PendingResponse inflight;
  auto fetch = [&](const std::string& cont) {
    inflight.set(transport_.start(Transport::Use::kRequest, http::methods::GET, listPath(cont)));
  };
  std::string cont;
  fetch(cont);
  while (!stop_.stopping()) {
    auto resp = transport_.await(inflight.take(), listPath(cont));
    if (!resp.ok()) return Error{what + ": " + resp.error(), resp.code()};
    int code = resp->status_code();
    if (code < 200 || code >= 300) {
      std::string body = Transport::bodyText(*resp);
      if (code == http::status_codes::Gone && !cont.empty() && expired++ < 3) {
        // The continue token expired (its snapshot was compacted): start over.
        cont.clear();
        fetch(cont);
        continue;
      }
      return Error{what + ": " + Transport::httpError(code, body)};
    }
    // Decoded while it streams in; the next page is requested as soon as
    // its continue token is seen in the first bytes.
    BodyStreamBuf buf(resp->body(), transport_.idleLimit(Transport::Use::kRequest));
    std::string prefetched = peekContinue(buf.peek(4096));
    if (!prefetched.empty()) fetch(prefetched);
    std::istream text(&buf);
    auto page = parseKubeList(kind, text, [&](KubeObject&& o) {
      std::string key = objectKey(o.ns, o.name);
      if (!o.ok()) {
        countMalformed(o);
        // Keep the last good version of a known object rather than delete it.
        if (auto it = index_.find(key); it != index_.end()) it->second.generation = generation;
        return;
      }
      uint64_t fp = kubeFingerprint(o);
      auto [it, inserted] = index_.try_emplace(std::move(key));
      it->second.generation = generation;
      if (!inserted && it->second.fingerprint == fp) return;
      it->second.fingerprint = fp;
      batch.push_back(Delivery{Delivery::Op::kUpsert, kind, std::move(o)});
      if (batch.size() >= 256) dispatcher_.enqueue(batch);
    });
    dispatcher_.enqueue(batch);
    if (!page.ok()) return Error{what + ": " + (buf.error().empty() ? page.error() : buf.error())};
    if (list_rv.empty()) list_rv = page->resource_version;
    cont = page->continue_token;
    if (cont.empty()) break;
    if (cont != prefetched) fetch(cont);
  }
  if (stop_.stopping()) return Error{"stopping", ErrorCode::kClosed};
  for (auto it = index_.begin(); it != index_.end();) {
    if (it->second.generation == generation) {
      ++it;
      continue;
    }
    Delivery d{Delivery::Op::kDelete, kind, {}};
    splitKey(kind, it->first, d.object);
    batch.push_back(std::move(d));
    it = index_.erase(it);
  }
  dispatcher_.enqueue(batch);
  if (list_rv.empty()) return Error{std::string("the ") + kubeKindName(kind) + " list has no resourceVersion"};
  return list_rv;
}

Reflector::WatchEnd Reflector::watch(std::string& rv, uint64_t& delivered, std::string& error) {
  const ObjectKind kind = options_.kind;
  std::string path = std::string(resourcePath(kind)) + "?watch=true&allowWatchBookmarks=true&resourceVersion=" +
                     web::uri::encode_data_string(rv) +
                     "&timeoutSeconds=" + std::to_string(options_.watch_timeout.count());
  auto resp = transport_.send(Transport::Use::kWatch, http::methods::GET, path);
  std::string what = std::string("watching ") + kubeKindName(kind) + "s";
  if (!resp.ok()) {
    error = what + ": " + resp.error();
    return WatchEnd::kFailed;
  }
  int code = resp->status_code();
  if (code == http::status_codes::Gone) return WatchEnd::kGone;
  if (code < 200 || code >= 300) {
    error = what + " from " + transport_.server() + ": " + Transport::httpError(code, Transport::bodyText(*resp));
    return WatchEnd::kFailed;
  }
  BodyStreamBuf buf(resp->body(), transport_.idleLimit(Transport::Use::kWatch));
  std::string pending;
  std::vector<char> chunk(64 * 1024);
  while (!stop_.stopping()) {
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
        if (index_.erase(key) == 0) continue;
        Delivery d{Delivery::Op::kDelete, kind, {}};
        d.object.ns = std::move(o.ns);
        d.object.name = std::move(o.name);
        dispatcher_.enqueueOne(std::move(d));
        delivered++;
        continue;
      }
      // MODIFIED events that change nothing the agent reads are not delivered.
      uint64_t fp = kubeFingerprint(o);
      auto [it, inserted] = index_.try_emplace(std::move(key));
      if (!inserted && it->second.fingerprint == fp) continue;
      it->second.fingerprint = fp;
      dispatcher_.enqueueOne(Delivery{Delivery::Op::kUpsert, kind, std::move(o)});
      delivered++;
    }
    pending.erase(0, start);
    if (pending.size() > kMaxEventLine) {
      error = what + ": an event line exceeds " + std::to_string(kMaxEventLine >> 20) + " MiB; dropping the stream";
      return WatchEnd::kFailed;
    }
  }
  // Ended cleanly (timeoutSeconds) or dropped: either way resume from rv.
  if (!buf.error().empty() && !stop_.stopping()) {
    DPU_LOG(kInfo, kLog) << what << ": stream ended (" << buf.error() << "); resuming from " << rv;
  }
  return WatchEnd::kEnded;
}

}  // namespace dpu::control::kube
