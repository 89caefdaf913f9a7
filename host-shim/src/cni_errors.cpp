// Building CNI answers (see cni_errors.h).
#include "host-shim/cni_errors.h"

namespace dpu::hostshim {

cni::v1::CniResponse cniError(CniCode code, std::string msg, std::string details) {
  cni::v1::CniResponse r;
  auto* e = r.mutable_error();
  e->set_code(static_cast<uint32_t>(code));
  e->set_msg(std::move(msg));
  e->set_details(std::move(details));
  return r;
}

cni::v1::CniResponse cniResultOf(const checkpoint::v1::HostAttachment& a) {
  cni::v1::CniResponse r;
  auto* res = r.mutable_result();
  auto* i = res->add_interfaces();
  i->set_name(a.ifname());
  i->set_mac(a.dpu().mac());
  i->set_mtu(a.dpu().mtu());
  i->set_sandbox(a.netns());
  i->set_pci_id(a.pci_address());
  for (const auto& ip : a.dpu().ips()) {
    auto* c = res->add_ips();
    c->set_address(ip.address());
    c->set_gateway(ip.gateway());
    c->set_interface(0);
  }
  for (const auto& rt : a.dpu().routes()) {
    auto* c = res->add_routes();
    c->set_dst(rt.dst());
    c->set_gw(rt.gw());
    c->set_mtu(rt.mtu());
  }
  return r;
}

CniCode codeFor(const Error& e) {
  switch (e.code) {
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
    case ErrorCode::kExhausted: return CniCode::kTryAgainLater;
    case ErrorCode::kConflict: return CniCode::kVfUnavailable;
    case ErrorCode::kInvalid: return CniCode::kInvalidConfig;
    default: break;
  }
  return CniCode::kDpuRejected;
}

std::string ifnameProblem(const std::string& ifname) {
  if (ifname.empty()) return "is empty";
  if (ifname.size() > 15)
    return "'" + ifname + "' is " + std::to_string(ifname.size()) + " characters; Linux allows at most 15";
  if (ifname == "." || ifname == "..") return "'" + ifname + "' is not a valid interface name";
  for (char c : ifname)
    if (c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0')
      return "'" + ifname + "' contains a character Linux refuses in interface names ('/', ':' or whitespace)";
  return "";
}

}  // namespace dpu::hostshim
