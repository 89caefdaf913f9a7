// Fuzz target for dpu-cni's input parsing (cni/invocation.h): the bytes are a
// network configuration as a runtime writes it to the plugin's stdin, for one
// verb chosen by the first byte; the same bytes also go through the CNI_ARGS
// and PCI address parsers. Whatever the input, parsing must end in either a
// supported version with the fields read, or a Failure with a well-known code
// and text for the operator; anything else aborts, like a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cni/invocation.h"
#include "cni/versions.h"

using namespace dpu::cni;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void checkFailure(const Failure& f) {
  check(f.code == 1 || f.code == 2 || f.code == 4 || f.code == 6 || f.code == 7);
  check(!f.msg.empty());
  check(!f.details.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr Verb kVerbs[] = {Verb::kAdd, Verb::kDel, Verb::kCheck, Verb::kStatus, Verb::kGc};
  Verb verb = kVerbs[data[0] % 5];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  Invocation inv;
  if (auto bad = parseNetworkConfig(verb, text, inv)) {
    checkFailure(*bad);
  } else {
    check(isSupported(inv.cni_version));
    check(!inv.network_name.empty() && isValidName(inv.network_name));
    check(!inv.socket.empty() && inv.socket[0] == '/');
    check(inv.mtu == 0 || (inv.mtu >= 576 && inv.mtu <= 9216));
    check(inv.device_id.empty() || normalizePciAddress(inv.device_id) == inv.device_id);
    if (verb == Verb::kCheck) check(inv.prev_result.has_value());
  }

  PodArgs pod;
  if (auto bad = parseCniArgs(text, pod)) checkFailure(*bad);
  if (auto bad = checkIfname(text)) checkFailure(*bad);
  if (auto pci = normalizePciAddress(text)) check(normalizePciAddress(*pci) == pci);
  return 0;
}
