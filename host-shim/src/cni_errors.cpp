// Building CNI error answers (see cni_errors.h).
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

CniCode codeFor(const DpuFailure& f) {
  switch (f.kind) {
    case DpuFailure::Kind::kUnreachable: return CniCode::kTryAgainLater;
    case DpuFailure::Kind::kConflict: return CniCode::kVfUnavailable;
    case DpuFailure::Kind::kRejected: return CniCode::kDpuRejected;
    case DpuFailure::Kind::kNone: break;
  }
  return CniCode::kIoFailure;
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
