// The fake Kubernetes API server's Service cluster IPs, as the real server
// handles them: the service CIDRs of --service-cluster-ip-range (one, or two of
// different families, the first the primary family), and for each create or
// update of a Service the defaulting of spec.ipFamilyPolicy and
// spec.ipFamilies, the validation of clusterIP, clusterIPs, ipFamilies and
// ipFamilyPolicy, and the allocation (or release) of its cluster IPs
// (kube-apiserver's service REST storage, pkg/registry/core/service/storage,
// its ipallocator and pkg/apis/core/validation's ValidateService and
// ValidateServiceUpdate).
//
// Pure functions over a Service's spec: the caller owns the store and says
// which cluster IPs other Services hold. The fake allocates the first free
// address of a range where the real server picks one at random.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::fakes {

struct ServiceCidrs {
  std::vector<IpPrefix> ranges;  // [0]: the primary family

  // "10.96.0.0/12", "fd00:10:96::/112" or both comma-separated in either
  // order; refuses anything else (three, two of one family, host bits set,
  // larger than the real allocator takes) with kube-apiserver's reason.
  static Result<ServiceCidrs> parse(const std::string& text);
  // "IPv4" or "IPv6".
  std::string primaryFamily() const;
  bool dualStack() const { return ranges.size() == 2; }
  // The range of a family ("IPv4", "IPv6"); nullptr when the server has none.
  const IpPrefix* range(const std::string& family) const;
  // The first address of the primary range (the `kubernetes` Service's).
  IpAddress firstPrimary() const;
};

// Why a Service is refused: field causes (422 Invalid, fields as the real
// server names them), or an internal error (500: a range is full).
struct ServiceIpProblems {
  std::vector<std::pair<std::string, std::string>> causes;  // field, message
  std::string internal;
  bool empty() const { return causes.empty() && internal.empty(); }
};

// Defaults, validates and allocates the cluster IP fields of `spec` (a
// Service's, its type defaulted) in place: `old_spec` is the stored Service's
// on an update, nullptr on a create; `taken` holds every cluster IP other
// Services have. Refused: `spec` is left in some intermediate state, to be
// discarded. An IP that an update drops (SingleStack again) is released by
// no longer being in the stored spec.
ServiceIpProblems assignServiceIps(nlohmann::json& spec, const nlohmann::json* old_spec, const ServiceCidrs& cidrs,
                                   const std::set<IpAddress>& taken);

// The address families a Service's EndpointSlices are for (the real
// EndpointSlice controller's: spec.ipFamilies; for a Service stored without
// them, the family of its clusterIP, else IPv4).
std::vector<std::string> serviceAddressTypes(const nlohmann::json& spec);

}  // namespace dpu::fakes
