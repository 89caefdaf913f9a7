// hostshim-client: sends one CniRequest to host-shim's socket and prints the
// CniResponse as JSON ({"result": ...} or {"error": {"code", "msg", "details"}}).
// The system tests drive host-shim with it, without dpu-cni in between.
//   hostshim-client --socket PATH add|del|check|status|gc [--container ID]
//       [--netns PATH] [--ifname eth0] [--device PCI] [--mac MAC] [--mtu N]
//       [--prev-result JSON] [--valid CID/IFNAME]... [--network NAME] [--timeout-ms N] [--time]
// --network is the CNI network's name (default dpu-test).
// Exit: 0 success, 1 a CNI error answer, 2 no answer (socket, timeout).
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "common/ipc_proto.h"
#include "dpu/cni/v1/cni.pb.h"

using namespace dpu;

int main(int argc, char** argv) {
  std::string socket = "/run/dpu-cni/host-shim.sock";
  cni::v1::CniRequest req;
  req.set_ifname("eth0");
  req.set_cni_version("1.1.0");
  req.set_network_name("dpu-test");
  long timeout_ms = 20000;
  bool timing = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "hostshim-client: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--socket")
      socket = next();
    else if (a == "add")
      req.set_command(cni::v1::ADD);
    else if (a == "del")
      req.set_command(cni::v1::DEL);
    else if (a == "check")
      req.set_command(cni::v1::CHECK);
    else if (a == "status")
      req.set_command(cni::v1::STATUS);
    else if (a == "gc")
      req.set_command(cni::v1::GC);
    else if (a == "--container")
      req.set_container_id(next());
    else if (a == "--netns")
      req.set_netns(next());
    else if (a == "--ifname")
      req.set_ifname(next());
    else if (a == "--device")
      req.set_device_id(next());
    else if (a == "--mac")
      req.set_requested_mac(next());
    else if (a == "--mtu")
      req.set_requested_mtu(static_cast<uint32_t>(std::stoul(next())));
    else if (a == "--network")
      req.set_network_name(next());
    else if (a == "--prev-result")
      req.set_prev_result_json(next());
    else if (a == "--pod") {
      // namespace/name/uid
      std::string v = next();
      auto s1 = v.find('/'), s2 = v.find('/', s1 + 1);
      req.mutable_pod()->set_namespace_(v.substr(0, s1));
      req.mutable_pod()->set_name(v.substr(s1 + 1, s2 - s1 - 1));
      if (s2 != std::string::npos) req.mutable_pod()->set_uid(v.substr(s2 + 1));
    } else if (a == "--valid") {
      std::string v = next();
      auto slash = v.rfind('/');
      auto* r = req.add_valid_attachments();
      r->set_container_id(v.substr(0, slash));
      r->set_ifname(slash == std::string::npos ? "eth0" : v.substr(slash + 1));
    } else if (a == "--timeout-ms")
      timeout_ms = std::stol(next());
    else if (a == "--time")
      timing = true;
    else {
      std::fprintf(stderr, "hostshim-client: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (req.command() == cni::v1::COMMAND_UNSPECIFIED) {
    std::fprintf(stderr, "hostshim-client: say add, del, check, status or gc\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  auto reply = ipc::call<cni::v1::CniResponse>(socket, req, ipc::after(std::chrono::milliseconds(timeout_ms)));
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (timing) std::fprintf(stderr, "elapsed_ms %.3f\n", ms);
  if (!reply) {
    std::fprintf(stderr, "hostshim-client: %s\n", reply.error().c_str());
    return 2;
  }
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(*reply, &out, o);
  std::printf("%s\n", out.c_str());
  return reply->has_error() ? 1 : 0;
}
