// The Kubernetes implementation of ClusterSource: list+watch of Nodes, Pods,
// Namespaces, Services, EndpointSlices (discovery.k8s.io/v1) and NetworkPolicies over
// HTTPS (cpprestsdk) with a bearer token, as client-go's reflector does it:
//
//  - paginated lists (limit/continue) decoded while they stream in; then a
//    watch from the list's resourceVersion with allowWatchBookmarks and
//    timeoutSeconds, read line by line from the chunked body;
//  - a watch that ends or drops resumes from the last resourceVersion seen
//    (event or bookmark); 410 Gone (HTTP status or an ERROR event) relists and
//    delivers only the differences against what was delivered before;
//  - failures back off exponentially with jitter (backoff_initial..backoff_max);
//  - MODIFIED events that change nothing the agent reads are not delivered;
//  - malformed objects are skipped, counted and logged with kind/ns/name.
//
// Each kind has its own reflector (src/kube_reflector.h): its own thread,
// versions, backoff and relists, so one kind's 410 or outage touches no other.
// They share one transport (src/kube_transport.h: the HTTPS clients and the
// rotating token); one dispatcher thread (src/kube_dispatcher.h) calls the
// listener, so callbacks never run concurrently (see cluster_source.h); the
// Node PATCH of publishSelf() is src/kube_node_publisher.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/cluster_source.h"
#include "control/kube_config.h"

namespace dpu::control {

struct KubeSourceConfig {
  // Where the API server is: a kubeconfig path, or (when empty) the in-cluster
  // service account in `in_cluster_dir`.
  std::string kubeconfig;
  std::string kube_context;  // empty: current-context
  std::string in_cluster_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string api_server;    // in-cluster only: instead of KUBERNETES_SERVICE_HOST/PORT
  std::string node_name;     // this host's Node, for publishSelf()
  std::vector<ObjectKind> resources = {ObjectKind::kNode, ObjectKind::kPod, ObjectKind::kService,
                                       ObjectKind::kEndpointSlice, ObjectKind::kNetworkPolicy,
                                       ObjectKind::kNamespace};
  uint32_t page_size = 2000;                      // list limit, 1..10000
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::seconds watch_timeout{300};         // timeoutSeconds of each watch
  std::chrono::seconds request_timeout{30};        // lists (inactivity) and the node patch
  std::chrono::seconds token_reread{60};           // service-account token re-read at least this often
  // Relist this often even without 410 (differences only; a guard against a
  // watch that silently missed events). 0: never. Checked when a watch ends,
  // so the effective period is rounded up to watch_timeout.
  std::chrono::seconds relist_period{0};
  size_t max_pending = 4096;                       // decoded objects waiting for the listener
};

// Validates the config, loads the kubeconfig or in-cluster files, and builds
// the source (nothing is contacted before start() or publishSelf()).
Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config);
// The same with the connection given (tests, or a caller that built it).
Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config,
                                                            const KubeConnection& connection);

}  // namespace dpu::control
