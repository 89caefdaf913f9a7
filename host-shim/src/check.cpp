// The CHECK comparison (see check.h).
#include "host-shim/check.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace dpu::hostshim {

Result<void> compareWithPrevResult(const std::string& prev_result_json, const std::string& ifname,
                                   const std::string& netns, const LiveInterface& live) {
  auto prev = nlohmann::json::parse(prev_result_json, nullptr, false);
  if (!prev.is_object()) return Error{"prevResult is not a JSON object"};
  if (!live.exists) return Error{"interface " + ifname + " does not exist in " + netns};
  const auto& ifaces = prev.value("interfaces", nlohmann::json::array());
  if (!ifaces.is_array()) return Error{"prevResult.interfaces is not a list"};
  int ours = -1;
  for (size_t i = 0; i < ifaces.size(); ++i) {
    if (!ifaces[i].is_object() || ifaces[i].value("name", "") != ifname) continue;
    std::string sandbox = ifaces[i].value("sandbox", "");
    if (!sandbox.empty() && sandbox != netns) continue;
    ours = static_cast<int>(i);
    break;
  }
  if (ours < 0) return Error{"prevResult lists no interface " + ifname + " in sandbox " + netns};
  const auto& iface = ifaces[ours];
  if (iface.contains("mac") && iface["mac"].is_string()) {
    auto mac = MacAddress::parse(iface["mac"].get<std::string>());
    if (!mac) return Error{"prevResult.interfaces[" + std::to_string(ours) + "].mac: " + mac.error()};
    if (*mac != live.mac) return Error{ifname + " has MAC " + live.mac.str() + ", prevResult says " + mac->str()};
  }
  if (iface.contains("mtu") && iface["mtu"].is_number_unsigned() && iface["mtu"].get<uint32_t>() != 0 &&
      iface["mtu"].get<uint32_t>() != live.mtu)
    return Error{ifname + " has MTU " + std::to_string(live.mtu) + ", prevResult says " +
                 std::to_string(iface["mtu"].get<uint32_t>())};

  std::vector<IpPrefix> our_networks;
  const auto& ips = prev.value("ips", nlohmann::json::array());
  for (size_t i = 0; ips.is_array() && i < ips.size(); ++i) {
    const auto& ip = ips[i];
    if (!ip.is_object() || !ip.contains("interface") || !ip["interface"].is_number_integer() ||
        ip["interface"].get<int>() != ours)
      continue;
    auto a = IpInterfaceAddress::parse(ip.value("address", ""));
    if (!a) return Error{"prevResult.ips[" + std::to_string(i) + "].address: " + a.error()};
    our_networks.push_back(a->network());
    if (std::find(live.addresses.begin(), live.addresses.end(), *a) == live.addresses.end())
      return Error{ifname + " lacks address " + a->str() + " from prevResult"};
  }

  const auto& routes = prev.value("routes", nlohmann::json::array());
  for (size_t i = 0; routes.is_array() && i < routes.size(); ++i) {
    const auto& r = routes[i];
    if (!r.is_object()) continue;
    auto dst = IpPrefix::parse(r.value("dst", ""), true);
    if (!dst) return Error{"prevResult.routes[" + std::to_string(i) + "].dst: " + dst.error()};
    std::optional<IpAddress> gw;
    if (r.contains("gw") && r["gw"].is_string() && !r["gw"].get<std::string>().empty()) {
      auto g = IpAddress::parse(r["gw"].get<std::string>());
      if (!g) return Error{"prevResult.routes[" + std::to_string(i) + "].gw: " + g.error()};
      gw = *g;
    }
    // A route is ours when its gateway is on one of our networks, or when we
    // are the only interface of the result; other plugins' routes are theirs.
    bool mine = ifaces.size() == 1;
    if (gw)
      for (const auto& n : our_networks) mine = mine || n.contains(*gw);
    if (!mine) continue;
    bool found = false;
    for (const auto& live_route : live.routes) {
      if (live_route.dst.length != dst->length || live_route.dst.address.family != dst->address.family) continue;
      if (live_route.dst.length > 0 && !dst->contains(live_route.dst.address)) continue;
      if (gw && live_route.gw != gw) continue;
      found = true;
      break;
    }
    if (!found)
      return Error{ifname + " lacks route " + dst->str() + (gw ? " via " + gw->str() : "") + " from prevResult"};
  }
  return {};
}

Result<void> checkDataplaneState(const std::string& id, const Result<attach::v1::AttachResponse>& answer) {
  if (!answer) {
    if (answer.code() == ErrorCode::kNotFound) {
      return Error{"the DPU agent has no attachment " + id +
                       " (it lost its state: host-shim replays the pod, retry; if it stays, DEL and ADD the pod)",
                   ErrorCode::kUnavailable};
    }
    return Error{"cannot ask the DPU whether it forwards for attachment " + id + ": " + answer.error(),
                 answer.code() == ErrorCode::kUnavailable || answer.code() == ErrorCode::kTimeout ? ErrorCode::kUnavailable
                                                                                                 : ErrorCode::kFailed};
  }
  const std::string& state = answer->attachment().dataplane_state();
  if (state == "programmed") return {};
  if (state == "pending" || state.empty()) {
    return Error{"the DPU's dataplane has not acknowledged attachment " + id + " yet (pending); retry",
                 ErrorCode::kUnavailable};
  }
  return Error{"the DPU's dataplane does not forward for attachment " + id + ": " + state};
}

}  // namespace dpu::hostshim
