// A fake Kubernetes API server with real state that speaks the real wire
// protocol, for the Kubernetes ClusterSource's tests, the control-plane scale
// benchmark and the lab's Kubernetes mode (driven with a real kubectl):
//
//  - HTTP/1.1 with keep-alive, over TLS (OpenSSL; the test makes the CA) or
//    plain TCP; bearer tokens naming users and groups (401 with a Status
//    otherwise); RBAC from ClusterRole/Role/binding files (403 with the real
//    server's Status and message for anything they do not grant; denials and
//    unused grants recorded, fake_kube_rbac.h);
//  - discovery (/api, /apis, group versions), /version, health endpoints and
//    the OpenAPI v3 index kubectl reads (fake_kube_resources.h);
//  - Namespaces, Nodes, Pods, Services, discovery.k8s.io/v1 EndpointSlices and
//    networking.k8s.io/v1 NetworkPolicies at their real paths (cluster-wide
//    and per namespace, status subresources): get, list (limit/continue over
//    a consistent snapshot, 410 Expired for a continue token whose snapshot
//    was dropped; label and field selectors; Table output), watch, create,
//    update, patch (JSON merge, strategic merge, JSON patch), delete (pods on
//    a node and namespaces terminate first, finalizers hold objects) and
//    deletecollection; decoding and field validation as the real server does
//    it (fieldValidation Strict/Warn/Ignore, wrong types refused, names
//    checked, namespaces must exist, resourceVersion conflicts), server-set
//    metadata and the defaults clients rely on; a Service's cluster IPs from
//    one service CIDR or two (dual stack: ipFamilyPolicy and ipFamilies
//    defaulted, validated, allocated and released as the real server does,
//    fake_kube_services.h);
//  - ?watch=true streams (chunked, one JSON event per line) from a
//    resourceVersion: one global counter for every change, a bounded event
//    history, 410 Gone (an ERROR event, or the HTTP status if asked) for a
//    version older than the history, BOOKMARK events when asked for,
//    timeoutSeconds, selectors (an object that stops matching is DELETED for
//    that watch), and dropped connections (even mid-event) on demand;
//  - with `controllers`, what a control plane adds: a scheduler (node
//    selectors, required node affinity, taints and tolerations), the
//    EndpointSlice controller (a slice per address family of the Service, from
//    the pods' podIPs), namespace finalization, and the namespaces
//    and `kubernetes` Service a new cluster has;
//  - a control API for tests: in-process methods, and the same over HTTP under
//    /fake/ for a fake running as its own process (fake_kube_apiserver). The
//    control API stores what it is given, unchecked (tests feed malformed
//    objects through it on purpose).
//
// Written by hand over sockets rather than with cpprestsdk's listener because
// the listener cannot hold a response open and stream chunks into it.
#pragma once

#include <array>
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
#include "fake_kube_rbac.h"
#include "fake_kube_resources.h"
#include "fake_kube_services.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dpu::fakes {

// How hangResource holds a request: never answered, or answered with a list's
// headers and the start of its body and then nothing more (a server or a
// proxy that stalls mid-response).
enum class FakeKubeHang : uint8_t { kNone, kNoAnswer, kStalledBody };

// A bearer token and whom it authenticates.
struct FakeKubeToken {
  std::string token;
  KubeUser user;
};

struct FakeKubeApiServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 0;                  // 0: any free port
  std::string cert_file;              // both set: HTTPS
  std::string key_file;
  // `token` authenticates `user`; with no token at all (neither this nor
  // `tokens`) every request is `user` (a kubeconfig with a client
  // certificate, as far as the server is concerned).
  std::string token;
  KubeUser user{"system:admin", {"system:masters"}};
  std::vector<FakeKubeToken> tokens;  // more identities
  // ClusterRoles, Roles and their bindings (YAML or JSON files). Non-empty:
  // RBAC is enforced; empty: every authenticated request is allowed.
  std::vector<std::string> rbac_files;
  size_t history = 10000;             // events kept for watches from an older version
  std::chrono::milliseconds bookmark_interval{1000};
  bool gone_as_status = false;        // too-old watch: HTTP 410 instead of an ERROR event
  bool controllers = false;           // scheduler, EndpointSlices, namespace finalization, bootstrap objects
  // Where Services' cluster IPs come from, as kube-apiserver's
  // --service-cluster-ip-range: one CIDR, or an IPv4 and an IPv6 one
  // comma-separated (dual stack; the first is the primary family).
  std::string service_cidr = "10.96.0.0/12";
  std::string git_version = "v1.32.0";        // /version
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
  uint64_t writes = 0;  // creates, updates, patches and deletes through the REST API
  uint64_t unauthorized = 0;
  uint64_t forbidden = 0;
  uint64_t tls_handshake_failures = 0;  // connections refused before any request
  uint64_t injected_failures = 0;       // requests answered by failResource
  uint64_t hung_requests = 0;           // requests held by hangResource
  size_t open_watches = 0;
  std::string last_patch_content_type;
  // Per resource (index: KubeResource), the resourceVersion of the last
  // BOOKMARK written on one of its watches; 0 before the first.
  std::array<uint64_t, kKubeResourceCount> last_bookmark_rv{};
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
  // From now on every request for `r` answers `code` (503: as when the
  // storage or an aggregated API behind that resource is down) with a
  // Status; 0 ends it. Open watches of `r` carry on.
  void failResource(KubeResource r, int code);
  // From now on every request for `r` but a watch is held as `how` says,
  // with its connection open, until kNone (the connection is then closed,
  // unanswered) or stop(). Open watches of `r` carry on.
  void hangResource(KubeResource r, FakeKubeHang how);
  // Ends every open watch by closing its connection without the final chunk;
  // mid_event: after half an event line.
  void dropWatches(bool mid_event = false);
  // While paused, open watches send nothing (events queue up in the history);
  // lets a test change and compact state before a watch can see it.
  void pauseWatches(bool paused);
  // The token of `user` from now on (rotation: the old one gets 401).
  void setToken(const std::string& token);
  // Replaces the whole state with the benchmark cluster (no events).
  void loadScale(const FakeKubeScale& scale);
  FakeKubeStats stats() const;

  // RBAC evidence (empty when RBAC is off): every refusal, every grant with
  // whether a request used it.
  std::vector<std::string> rbacDenials() const;
  std::vector<KubeGrant> rbacGrants() const;

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
    StoredPtr previous;  // the object before a MODIFIED (selector-filtered watches)
  };
  struct Snapshot {
    uint64_t rv;
    std::vector<StoredPtr> items;
  };
  struct Conn;
  struct Request;
  struct Route;
  struct Reply;
  // A Status reply; and the reply refusing what validation or allocation refused.
  static Reply statusReply(int code, const std::string& reason, const std::string& msg,
                           const nlohmann::json& details = nullptr);
  static Reply refusedReply(const Result<void>& r, int code);

  void acceptLoop();
  void serve(std::shared_ptr<Conn> conn);
  bool handle(Conn& conn, const Request& req);
  bool handleList(Conn& conn, const Route& route, const Request& req);
  bool handleWatch(Conn& conn, const Route& route, const Request& req);
  bool handleControl(Conn& conn, const Request& req);
  Reply handleGet(const Route& route, const Request& req);
  Reply handleCreate(const Route& route, const Request& req);
  Reply handleUpdate(const Route& route, const Request& req, bool patch);
  Reply handleDelete(const Route& route, const Request& req);
  Reply handleDeleteCollection(const Route& route, const Request& req);
  Reply nonResource(const Request& req, bool& handled);

  // Under mu_.
  uint64_t storeLocked(KubeResource r, const std::string& key, std::string json, const char* type);
  void recordLocked(KubeResource r, const char* type, StoredPtr obj, StoredPtr previous);
  void eraseLocked(KubeResource r, const std::string& key);
  // Deletes now, or marks for deletion (graceful pods, finalizers,
  // namespaces); returns the object as the response shows it.
  nlohmann::json deleteLocked(KubeResource r, const std::string& key, int64_t grace_seconds);
  void finishNamespaceLocked(const std::string& ns);
  Result<void> validateLocked(KubeResource r, nlohmann::json& obj, const std::string& field_validation,
                              std::vector<std::string>& warnings, bool creating);
  void defaultLocked(KubeResource r, nlohmann::json& obj, const nlohmann::json* old);
  // A Service's cluster IP fields defaulted, validated and allocated
  // (fake_kube_services.h) before it is stored under `store_key`; `old` is the
  // stored version on an update. kInvalid: 422 with the causes.
  Result<void> assignServiceIpsLocked(const std::string& store_key, nlohmann::json& obj, const nlohmann::json* old);
  void reconcileLocked();
  void scheduleLocked();
  void syncEndpointSlicesLocked();
  void bootstrapLocked();
  void controllerLoop();

  FakeKubeApiServerOptions options_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  SSL_CTX* ssl_ctx_ = nullptr;
  std::thread accept_thread_;
  std::thread controller_thread_;
  std::atomic<bool> stopping_{false};
  KubeRbac rbac_;
  ServiceCidrs service_cidrs_;
  bool rbac_on_ = false;

  mutable std::mutex conns_mu_;
  std::list<std::pair<std::shared_ptr<Conn>, std::thread>> conns_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, StoredPtr> objects_[kKubeResourceCount];
  std::deque<Event> history_;
  uint64_t rv_ = 1000;
  uint64_t floor_ = 1000;  // events with rv > floor_ are in history_
  uint64_t reconciled_ = 0;
  uint64_t uid_counter_ = 0;
  uint64_t drop_generation_ = 0;
  bool drop_mid_event_ = false;
  bool paused_ = false;
  std::array<std::atomic<int>, kKubeResourceCount> failing_{};  // failResource
  std::array<FakeKubeHang, kKubeResourceCount> hanging_{};       // hangResource, under mu_
  std::string token_;
  std::map<uint64_t, std::shared_ptr<Snapshot>> snapshots_;
  uint64_t next_snapshot_ = 1;
  FakeKubeStats stats_;
};

}  // namespace dpu::fakes
