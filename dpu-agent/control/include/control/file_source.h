// The cluster-file ClusterSource: the embedded default for the lab and for
// clusters without Kubernetes. One JSON or YAML file lists the cluster's
// objects; the keys of each entry mirror the Kubernetes object's fields (its
// metadata's namespace/name/labels and its spec's and status's fields, side
// by side), they are read by the same code as the Kubernetes source's
// (cluster_objects.h) with the same defaults and refusals, and unknown keys
// are refused. dpu-agent/control/examples/cluster.yaml shows every field.
//
//   nodes:
//     - {name: node-a, tunnelIP: 192.168.50.1, podCIDR: 10.244.1.0/24, ipsecPublicKey: "...", ipsecEpoch: 1, labels: {...},
//        portKeys: {10.244.1.5: 3}}
//   namespaces:                       # optional: a namespace any object names exists anyway
//     - {name: prod, labels: {team: a}}   # (labels get kubernetes.io/metadata.name: <name>)
//   pods:
//     - {namespace: default, name: web-1, uid: "...", nodeName: node-a, ips: [10.244.1.5], labels: {app: web},
//        containers: [{name: main, ports: [{name: http, containerPort: 8080, protocol: TCP}]}]}
//   services:
//     - {namespace: default, name: web, type: ClusterIP, clusterIPs: [10.96.0.10],
//        ports: [{name: http, protocol: TCP, port: 80, targetPort: http}], sessionAffinity: ClientIP,
//        loadBalancer: {ingress: [{ip: 203.0.113.7}]}}     # status.loadBalancer
//   endpointSlices:
//     - {namespace: default, name: web-1, service: web, addressType: IPv4,
//        endpoints: [{addresses: [10.244.1.5], conditions: {ready: true}, nodeName: node-a}],
//        ports: [{name: http, protocol: TCP, port: 8080}]}
//   networkPolicies:
//     - {namespace: default, name: web, podSelector: {matchLabels: {app: web}}, policyTypes: [Ingress],
//        ingress: [{from: [{podSelector: {}}], ports: [{port: http}]}]}
//
// Next to it, the directory "<file>.d/" holds one publish file per node
// ("<node>.json", written by that node's agent through publishSelf, atomically):
// {"name", "tunnelIP", "ipsecPublicKey", "ipsecEpoch", "ipsecMode", "ipsecNatAddress", "podCIDRs", "portKeys"}. A published
// entry fills in or overrides those fields of the node of that name (its
// portKeys replace the main file's: the node's agent knows its ports), and
// adds the node when the main file does not list it, so agents sharing a
// directory see each other without a central writer.
//
// The source polls the files' identity (inode, size, mtime) every 200 ms; a
// change reloads everything and delivers only the differences, then synced().
// A file replaced by rename (a new inode) is read at once. A file written in
// place (same inode, new size or mtime) may be half written when the poll
// sees it: `cp`, `cat >` and editors that save in place truncate it first.
// It is read once its mtime is `settle` old, or once its identity has stayed
// the same for `settle` (an mtime in the future), so an emptied-for-an-
// instant file never removes every node from the dataplane.
// A file that does not parse or holds an invalid object is refused as a
// whole: the last good state stays, stats().last_error says why, and
// stats().malformed counts it (a half-edited file never deletes nodes).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster_source.h"

namespace dpu::control {

// Everything a cluster file says, keyed the way the listener names objects.
struct ClusterSnapshot {
  std::map<std::string, NodeInfo> nodes;
  std::map<std::string, NamespaceInfo> namespaces;
  std::map<std::string, PodInfo> pods;                    // "ns/name"
  std::map<std::string, ServiceInfo> services;            // "ns/name"
  std::map<std::string, EndpointSliceInfo> slices;        // "ns/name"
  std::map<std::string, NetworkPolicyInfo> policies;      // "ns/name"
};

// Parses one cluster file's text (JSON or YAML); the error names the object and field.
Result<ClusterSnapshot> parseClusterFile(const std::string& text, const std::string& origin);
// One publish file; the error names the field.
Result<NodeInfo> parsePublishFile(const std::string& text, const std::string& origin);
// Publish entries merged into the main file's nodes.
void mergePublished(ClusterSnapshot& snap, const std::vector<NodeInfo>& published);
// The differences from `before` to `after`, delivered to the listener; returns how many.
// Adds the changes per kind to `by_kind` when given.
size_t deliverDifferences(const ClusterSnapshot& before, const ClusterSnapshot& after, ClusterListener& listener,
                          std::array<uint64_t, kObjectKindCount>* by_kind = nullptr);

class FileClusterSource : public ClusterSource {
 public:
  explicit FileClusterSource(std::string path, std::chrono::milliseconds poll = std::chrono::milliseconds(200),
                             std::chrono::milliseconds settle = std::chrono::milliseconds(250));
  ~FileClusterSource() override;

  Result<void> start(ClusterListener& listener) override;
  void stop() override;
  Result<void> publishSelf(const SelfEntry& self) override;
  ClusterSourceStats stats() const override;
  std::string kind() const override { return "file"; }

  std::string publishDir() const { return path_ + ".d"; }
  // The pod CIDRs publishSelf writes too (SelfEntry has none: with the file
  // source the node's pod CIDR may come from its own config, and the others
  // need it to route).
  void setPublishedPodCidrs(std::vector<std::string> cidrs) { published_pod_cidrs_ = std::move(cidrs); }
  // Loads now if anything changed (the poll thread calls this; tests may too).
  void pollOnce();

 private:
  struct FileId {
    uint64_t inode = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  std::map<std::string, FileId> identities() const;
  void reload(const std::map<std::string, FileId>& ids);
  // Whether a file written in place may still be being written.
  bool unsettled(const std::map<std::string, FileId>& ids);

  const std::string path_;
  const std::chrono::milliseconds poll_;
  const std::chrono::milliseconds settle_;
  ClusterListener* listener_ = nullptr;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::mutex poll_mu_;  // one reload at a time
  std::map<std::string, FileId> seen_;
  std::map<std::string, FileId> unsettled_ids_;  // what the last deferred poll saw
  std::chrono::steady_clock::time_point unsettled_since_{};
  ClusterSnapshot current_;
  std::map<std::string, NodeInfo> last_good_published_;  // by file name
  bool delivered_once_ = false;
  std::vector<std::string> published_pod_cidrs_;
  bool published_ = false;

  mutable std::mutex stats_mu_;
  ClusterSourceStats stats_;
};

}  // namespace dpu::control
