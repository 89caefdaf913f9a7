// Services + EndpointSlices → dataplane Services (see service_compiler.h).
#include "control/service_compiler.h"

#include <algorithm>

#include "common/net_address.h"
#include "control/cluster_objects.h"
#include "model/model.h"

namespace dpu::control {
namespace {

std::string keyOf(const std::string& ns, const std::string& name) { return ns + "/" + name; }

dpv1::L4Protocol l4(Protocol p) {
  switch (p) {
    case Protocol::kTcp: return dpv1::TCP;
    case Protocol::kUdp: return dpv1::UDP;
    case Protocol::kSctp: return dpv1::SCTP;
  }
  return dpv1::L4_PROTOCOL_UNSPECIFIED;
}

// What a slice of `type` can back: the families of the service's cluster IPs.
bool familyServed(AddressType type, const std::vector<IpAddress>& cluster_ips) {
  if (type == AddressType::kFQDN) return false;
  for (const auto& ip : cluster_ips) {
    if (ip.isV4() == (type == AddressType::kIPv4)) return true;
  }
  return false;
}

}  // namespace

std::string notProxiedReason(const ServiceInfo& svc) {
  if (svc.type == ServiceType::kExternalName) return "an ExternalName service is a DNS name, not a virtual IP";
  if (svc.proxiedElsewhere()) {
    return std::string("labelled ") + kServiceProxyNameLabel + "=" + svc.labels.at(kServiceProxyNameLabel) +
           ": another proxy serves it";
  }
  if (svc.headless || svc.cluster_ips.empty()) return "headless (no cluster IP): clients reach the endpoints directly";
  return "";
}

Result<dpv1::Service> compileService(const ServiceInfo& svc, const std::vector<EndpointSliceInfo>& slices,
                                     const std::string& node_name) {
  dpv1::Service out;
  out.set_name(keyOf(svc.ns, svc.name));
  std::vector<IpAddress> families;
  for (const auto& text : svc.cluster_ips) {
    out.add_cluster_ips(text);
    if (auto ip = IpAddress::parse(text)) families.push_back(*ip);
  }
  std::vector<std::string> external;
  for (const auto* list : {&svc.external_ips, &svc.load_balancer_ips}) {
    for (const auto& ip : *list) {
      // A load-balancer IP that is also an external IP is one frontend.
      if (std::find(external.begin(), external.end(), ip) == external.end()) external.push_back(ip);
    }
  }
  for (const auto& ip : external) out.add_external_ips(ip);
  const bool external_access =
      svc.type == ServiceType::kNodePort || svc.type == ServiceType::kLoadBalancer || !external.empty();
  out.set_internal_local(svc.internal_traffic_policy == TrafficPolicy::kLocal);
  out.set_external_local(external_access && svc.external_traffic_policy == TrafficPolicy::kLocal);
  if (svc.session_affinity == SessionAffinity::kClientIP) {
    out.set_affinity_timeout_s(svc.affinity_timeout_seconds ? svc.affinity_timeout_seconds : kDefaultAffinityTimeoutSeconds);
  }

  // Slices in name order, so that the same cluster state compiles to the same
  // message (the model sends only what differs).
  std::vector<const EndpointSliceInfo*> ordered;
  for (const auto& s : slices) ordered.push_back(&s);
  std::sort(ordered.begin(), ordered.end(), [](auto* a, auto* b) { return a->name < b->name; });

  for (const auto& sp : svc.ports) {
    auto* port = out.add_ports();
    port->set_name(sp.name);
    port->set_protocol(l4(sp.protocol));
    port->set_port(sp.port);
    if (svc.type == ServiceType::kNodePort || svc.type == ServiceType::kLoadBalancer) port->set_node_port(sp.node_port);
    std::map<std::pair<std::string, uint32_t>, dpv1::ServiceBackend> backends;
    for (const auto* slice : ordered) {
      if (!familyServed(slice->address_type, families)) continue;
      uint16_t number = 0;
      for (const auto& p : slice->ports) {
        if (p.name == sp.name && p.protocol == sp.protocol) number = p.port;
      }
      // No slice port for this service port, or one without a number: the
      // slice backs other ports only (kube-proxy skips it the same way).
      if (number == 0) continue;
      for (const auto& ep : slice->endpoints) {
        if (ep.addresses.empty()) continue;
        const bool ready = ep.ready || svc.publish_not_ready_addresses;
        if (!ready && !ep.serving) continue;
        dpv1::ServiceBackend b;
        b.set_ip(ep.addresses.front());
        b.set_port(number);
        b.set_local(!ep.node_name.empty() && ep.node_name == node_name);
        b.set_ready(ready);
        b.set_serving(ep.serving);
        b.set_terminating(ep.terminating);
        auto [it, fresh] = backends.try_emplace({b.ip(), b.port()}, b);
        if (!fresh && ready && !it->second.ready()) it->second = b;
      }
    }
    for (const auto& [k, b] : backends) *port->add_backends() = b;
  }
  if (auto parsed = model::parseService(out); !parsed) return std::move(parsed).takeError();
  return out;
}

std::set<std::string> ServiceCatalog::upsertService(const ServiceInfo& svc) {
  const std::string key = keyOf(svc.ns, svc.name);
  services_[key] = svc;
  return {key};
}

std::set<std::string> ServiceCatalog::deleteService(const std::string& ns, const std::string& name) {
  const std::string key = keyOf(ns, name);
  services_.erase(key);
  return {key};
}

std::set<std::string> ServiceCatalog::upsertSlice(const EndpointSliceInfo& slice) {
  const std::string key = keyOf(slice.ns, slice.name);
  std::set<std::string> touched{keyOf(slice.ns, slice.service_name)};
  if (auto old = slices_.find(key); old != slices_.end()) {
    const std::string before = keyOf(old->second.ns, old->second.service_name);
    touched.insert(before);
    by_service_[before].erase(key);
    if (by_service_[before].empty()) by_service_.erase(before);
  }
  slices_[key] = slice;
  by_service_[keyOf(slice.ns, slice.service_name)].insert(key);
  return touched;
}

std::set<std::string> ServiceCatalog::deleteSlice(const std::string& ns, const std::string& name) {
  const std::string key = keyOf(ns, name);
  auto it = slices_.find(key);
  if (it == slices_.end()) return {};
  const std::string svc = keyOf(it->second.ns, it->second.service_name);
  by_service_[svc].erase(key);
  if (by_service_[svc].empty()) by_service_.erase(svc);
  slices_.erase(it);
  return {svc};
}

const ServiceInfo* ServiceCatalog::service(const std::string& key) const {
  auto it = services_.find(key);
  return it == services_.end() ? nullptr : &it->second;
}

std::vector<EndpointSliceInfo> ServiceCatalog::slicesOf(const std::string& key) const {
  std::vector<EndpointSliceInfo> out;
  auto it = by_service_.find(key);
  if (it == by_service_.end()) return out;
  for (const auto& k : it->second) out.push_back(slices_.at(k));
  return out;
}

}  // namespace dpu::control
