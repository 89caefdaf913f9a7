// Rendering of CNI results, errors and VERSION answers (see render.h). The
// per-version shapes follow libcni's types (pkg/types/040, 100, and 1.1.0's
// additions): 0.3.x/0.4.0 ips carry "version"; 1.0.0 drops it; 1.1.0 adds
// interface "mtu", "socketPath", "pciID" and route "mtu"/"advmss"/"priority"/
// "table"/"scope".
#include "cni/render.h"

#include "cni/versions.h"

namespace dpu::cni {
namespace {

using nlohmann::ordered_json;
using nlohmann::json;

ordered_json stringList(const google::protobuf::RepeatedPtrField<std::string>& items) {
  ordered_json out = ordered_json::array();
  for (const auto& s : items) out.push_back(s);
  return out;
}

}  // namespace

std::string renderVersion(std::string_view cni_version) {
  ordered_json out;
  out["cniVersion"] = cni_version;
  ordered_json list = ordered_json::array();
  for (auto v : supportedVersions()) list.push_back(v);
  out["supportedVersions"] = std::move(list);
  return out.dump() + "\n";
}

std::string renderError(std::string_view cni_version, const Failure& failure) {
  ordered_json out;
  out["cniVersion"] = cni_version;
  out["code"] = failure.code;
  out["msg"] = failure.msg;
  if (!failure.details.empty()) out["details"] = failure.details;
  // Host-shim texts may carry bytes from the system (interface names): never fail on them.
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

ordered_json renderResult(const dpu::cni::v1::CniResult& result, std::string_view cni_version,
                          const ordered_json* fallback_dns) {
  ResultShape shape = shapeOf(cni_version);
  // ordered_json keeps libcni's key order (Go marshals struct fields in declaration order).
  ordered_json out;
  out["cniVersion"] = cni_version;
  if (result.interfaces_size() > 0) {
    ordered_json list = ordered_json::array();
    for (const auto& i : result.interfaces()) {
      ordered_json e;
      e["name"] = i.name();
      if (!i.mac().empty()) e["mac"] = i.mac();
      if (shape == ResultShape::k110 && i.mtu() != 0) e["mtu"] = i.mtu();
      if (!i.sandbox().empty()) e["sandbox"] = i.sandbox();
      if (shape == ResultShape::k110 && !i.pci_id().empty()) e["pciID"] = i.pci_id();
      list.push_back(std::move(e));
    }
    out["interfaces"] = std::move(list);
  }
  if (result.ips_size() > 0) {
    ordered_json list = ordered_json::array();
    for (const auto& ip : result.ips()) {
      ordered_json e;
      if (shape == ResultShape::k040) e["version"] = ip.address().find(':') == std::string::npos ? "4" : "6";
      if (ip.interface() >= 0 && ip.interface() < result.interfaces_size()) e["interface"] = ip.interface();
      e["address"] = ip.address();
      if (!ip.gateway().empty()) e["gateway"] = ip.gateway();
      list.push_back(std::move(e));
    }
    out["ips"] = std::move(list);
  }
  if (result.routes_size() > 0) {
    ordered_json list = ordered_json::array();
    for (const auto& r : result.routes()) {
      ordered_json e;
      e["dst"] = r.dst();
      if (!r.gw().empty()) e["gw"] = r.gw();
      if (shape == ResultShape::k110 && r.mtu() != 0) e["mtu"] = r.mtu();
      list.push_back(std::move(e));
    }
    out["routes"] = std::move(list);
  }
  const auto& d = result.dns();
  if (result.has_dns() && (d.nameservers_size() || !d.domain().empty() || d.search_size() || d.options_size())) {
    ordered_json dns;
    if (d.nameservers_size()) dns["nameservers"] = stringList(d.nameservers());
    if (!d.domain().empty()) dns["domain"] = d.domain();
    if (d.search_size()) dns["search"] = stringList(d.search());
    if (d.options_size()) dns["options"] = stringList(d.options());
    out["dns"] = std::move(dns);
  } else if (fallback_dns && fallback_dns->is_object() && !fallback_dns->empty()) {
    out["dns"] = *fallback_dns;
  }
  return out;
}

ordered_json mergeResults(const ordered_json& prev, const ordered_json& ours, std::string_view cni_version) {
  ordered_json merged = prev;
  merged["cniVersion"] = cni_version;
  size_t offset = 0;
  if (auto it = merged.find("interfaces"); it != merged.end() && it->is_array()) offset = it->size();
  if (auto it = ours.find("interfaces"); it != ours.end()) {
    ordered_json& list = merged["interfaces"];
    if (!list.is_array()) list = ordered_json::array();
    for (const auto& i : *it) list.push_back(i);
  }
  if (auto it = ours.find("ips"); it != ours.end()) {
    ordered_json& list = merged["ips"];
    if (!list.is_array()) list = ordered_json::array();
    for (auto ip : *it) {
      if (auto idx = ip.find("interface"); idx != ip.end()) *idx = idx->get<int64_t>() + static_cast<int64_t>(offset);
      list.push_back(std::move(ip));
    }
  }
  if (auto it = ours.find("routes"); it != ours.end()) {
    ordered_json& list = merged["routes"];
    if (!list.is_array()) list = ordered_json::array();
    for (const auto& r : *it) list.push_back(r);
  }
  if (auto it = ours.find("dns"); it != ours.end()) {
    auto p = merged.find("dns");
    if (p == merged.end() || !p->is_object() || p->empty()) merged["dns"] = *it;
  }
  return merged;
}

}  // namespace dpu::cni
