// A fake Kubernetes API server with real state that speaks the real wire
// protocol, for the Kubernetes ClusterSource's tests and the control-plane
// scale benchmark:
//
//  - HTTP/1.1 with keep-alive, over TLS (OpenSSL; the test makes the CA) or
//    plain TCP; bearer-token check (401 with a Status otherwise);
//  - lists of nodes, pods, services, discovery.k8s.io/v1 endpointslices and
//    networking.k8s.io/v1 networkpolicies with metadata.resourceVersion and
//    limit/continue pagination over a consistent snapshot (410 Expired for a
//    continue token whose snapshot was dropped);
//  - ?watch=true streams (chunked, one JSON event per line) from a
//    resourceVersion: one global counter for every change, a bounded event
//    history, 410 Gone (an ERROR event, or the HTTP status if asked) for a
//    version older than the history, BOOKMARK events when asked for,
//    timeoutSeconds, and dropped connections (even mid-event) on demand;
//  - PATCH of nodes with application/merge-patch+json (RFC 7386) or
//    strategic-merge-patch+json (treated as a merge patch: enough for
//    annotations);
//  - a control API for tests: in-process methods, and the same over HTTP under
//    /fake/ for a fake running as its own process (fake_kube_apiserver).
//
// Written by hand over sockets rather than with cpprestsdk's listener because
// the listener cannot hold a response open and stream chunks into it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dpu::fakes {

enum class KubeResource { kNodes, kPods, kServices, kEndpointSlices, kNetworkPolicies };

struct FakeKubeApiServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 0;                  // 0: any free port
  std::string cert_file;              // both set: HTTPS
  std::string key_file;
  std::string token;                  // empty: no authentication
  size_t history = 10000;             // events kept for watches from an older version
  std::chrono::milliseconds bookmark_interval{1000};
  bool gone_as_status = false;        // too-old watch: HTTP 410 instead of an ERROR event
};

// The benchmark's cluster: `nodes` nodes with a /24 each, `pods_per_node` pods
// on each, `services` ClusterIP services with one EndpointSlice of
// `endpoints_per_service` ready endpoints each, spread over `namespaces`.
struct FakeKubeScale {
  uint32_t nodes = 5000;
  uint32_t pods_per_node = 30;
  uint32_t services = 10000;
  uint32_t endpoints_per_service = 10;
  uint32_t namespaces = 100;
};

struct FakeKubeStats {
  uint64_t lists = 0;
  uint64_t watches = 0;
  uint64_t patches = 0;
  uint64_t unauthorized = 0;
  size_t open_watches = 0;
  std::string last_patch_content_type;
};

class FakeKubeApiServer {
 public:
  FakeKubeApiServer();
  ~FakeKubeApiServer();
  FakeKubeApiServer(const FakeKubeApiServer&) = delete;
  FakeKubeApiServer& operator=(const FakeKubeApiServer&) = delete;

  Result<void> start(const FakeKubeApiServerOptions& options);
  // Closes every connection and joins every thread.
  void stop();
  uint16_t port() const { return port_; }
  std::string url() const;

  // Creates or replaces an object (ADDED or MODIFIED event); the server sets
  // metadata.resourceVersion. Returns the new resourceVersion.
  Result<uint64_t> apply(KubeResource r, nlohmann::json object);
  // Stores the text verbatim under ns/name (for objects a real server would
  // never hold, to test that clients skip them).
  uint64_t applyRaw(KubeResource r, const std::string& ns, const std::string& name, const std::string& text);
  bool remove(KubeResource r, const std::string& ns, const std::string& name);
  std::optional<nlohmann::json> get(KubeResource r, const std::string& ns, const std::string& name) const;
  size_t count(KubeResource r) const;
  uint64_t resourceVersion() const;

  // Forgets the event history: every watch from before now gets 410 Gone.
  void compact();
  // Ends every open watch by closing its connection without the final chunk;
  // mid_event: after half an event line.
  void dropWatches(bool mid_event = false);
  // While paused, open watches send nothing (events queue up in the history);
  // lets a test change and compact state before a watch can see it.
  void pauseWatches(bool paused);
  // Tokens accepted from now on (rotation: the old one gets 401).
  void setToken(const std::string& token);
  // Replaces the whole state with the benchmark cluster (no events).
  void loadScale(const FakeKubeScale& scale);
  FakeKubeStats stats() const;

 private:
  struct Stored {
    std::string json;
    uint64_t rv;
  };
  using StoredPtr = std::shared_ptr<const Stored>;
  struct Event {
    uint64_t rv;
    KubeResource resource;
    const char* type;
    StoredPtr object;
  };
  struct Snapshot {
    uint64_t rv;
    std::vector<StoredPtr> items;
  };
  struct Conn;
  struct Request;

  void acceptLoop();
  void serve(std::shared_ptr<Conn> conn);
  bool handle(Conn& conn, const Request& req);
  bool handleList(Conn& conn, KubeResource r, const Request& req);
  bool handleWatch(Conn& conn, KubeResource r, const Request& req);
  bool handlePatch(Conn& conn, const std::string& name, const Request& req);
  bool handleControl(Conn& conn, const Request& req);
  uint64_t storeLocked(KubeResource r, const std::string& key, std::string json, const char* type);
  void recordLocked(KubeResource r, const char* type, StoredPtr obj);

  FakeKubeApiServerOptions options_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  SSL_CTX* ssl_ctx_ = nullptr;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex conns_mu_;
  std::list<std::pair<std::shared_ptr<Conn>, std::thread>> conns_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, StoredPtr> objects_[5];
  std::deque<Event> history_;
  uint64_t rv_ = 1000;
  uint64_t floor_ = 1000;  // events with rv > floor_ are in history_
  uint64_t drop_generation_ = 0;
  bool drop_mid_event_ = false;
  bool paused_ = false;
  std::string token_;
  std::map<uint64_t, std::shared_ptr<Snapshot>> snapshots_;
  uint64_t next_snapshot_ = 1;
  FakeKubeStats stats_;
};

}  // namespace dpu::fakes
