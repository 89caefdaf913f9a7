// Services and their EndpointSlices compiled into the dataplane's Service
// objects (proto dpu.dataplane.v1.Service), as kube-proxy reads them: which
// services are proxied at all, which endpoints of which slices back each
// service port, and the policies the dataplane applies. The dataplane
// balances; this decides what it balances to.
//
// ServiceCatalog holds the cluster's Services and EndpointSlices as the
// cluster source delivers them and answers, for one change, the one or two
// services it touches, so that the agent recompiles (and the model re-sends)
// only those. Not thread-safe: the agent calls it under its lock.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/cluster_source.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::control {

namespace dpv1 = ::dpu::dataplane::v1;

// Why the service is not proxied by this agent at all ("" when it is):
// ExternalName, headless (no cluster IP), or labelled
// service.kubernetes.io/service-proxy-name (another proxy's). Not a refusal:
// kube-proxy leaves these alone too.
std::string notProxiedReason(const ServiceInfo& svc);

// The dataplane Service for `svc` (which must be proxied: notProxiedReason
// empty) backed by `slices` (the service's own, any order), on node
// `node_name`:
//  - per service port, the endpoints of the slices of a cluster IP's family
//    whose slice port has the service port's name and protocol; the slice
//    port's number is the backend port (a named targetPort is resolved per
//    endpoint that way, as the EndpointSlice controller wrote it);
//  - an endpoint's first address; its ready/serving/terminating conditions;
//    one neither ready nor serving is left out, unless the service publishes
//    not-ready addresses (then every endpoint counts as ready);
//  - an endpoint in two slices (slices being rewritten) once, the ready copy;
//  - local: the endpoint's nodeName is `node_name`;
//  - internal_local / external_local from the traffic policies (external only
//    for a service reachable from outside: NodePort, LoadBalancer, externalIPs);
//  - affinity_timeout_s with ClientIP affinity (10800 when not given).
// An error says why the dataplane would refuse the result (model::parseService,
// the rules the dataplane enforces): the caller leaves the service out.
Result<dpv1::Service> compileService(const ServiceInfo& svc, const std::vector<EndpointSliceInfo>& slices,
                                     const std::string& node_name);

class ServiceCatalog {
 public:
  // Each returns the services ("namespace/name") whose compilation the change
  // may alter: the service itself, or the service of the slice (before and
  // after, when a slice moves from one service to another).
  std::set<std::string> upsertService(const ServiceInfo& svc);
  std::set<std::string> deleteService(const std::string& ns, const std::string& name);
  std::set<std::string> upsertSlice(const EndpointSliceInfo& slice);
  std::set<std::string> deleteSlice(const std::string& ns, const std::string& name);

  const ServiceInfo* service(const std::string& key) const;
  // The slices labelled for the service, by slice name.
  std::vector<EndpointSliceInfo> slicesOf(const std::string& key) const;

 private:
  std::map<std::string, ServiceInfo> services_;        // "ns/name"
  std::map<std::string, EndpointSliceInfo> slices_;    // "ns/slice-name"
  std::map<std::string, std::set<std::string>> by_service_;  // service key → slice keys
};

}  // namespace dpu::control
