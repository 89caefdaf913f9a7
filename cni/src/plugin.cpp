// The dpu-cni verbs (see plugin.h).
#include "cni/plugin.h"

#include <algorithm>

#include "cni/render.h"
#include "common/ipc_proto.h"
#include "common/log.h"

namespace dpu::cni {
namespace {

namespace v1 = dpu::cni::v1;
constexpr std::string_view kLog = "dpu-cni";
// STATUS must answer quickly even when host-shim is wedged: runtimes poll it.
constexpr double kStatusTimeoutSeconds = 2.0;

v1::Command commandOf(Verb v) {
  switch (v) {
    case Verb::kAdd: return v1::ADD;
    case Verb::kDel: return v1::DEL;
    case Verb::kCheck: return v1::CHECK;
    case Verb::kStatus: return v1::STATUS;
    case Verb::kGc: return v1::GC;
    case Verb::kVersion: break;
  }
  return v1::COMMAND_UNSPECIFIED;
}

Outcome failed(std::string_view cni_version, const Failure& f) {
  return Outcome{renderError(cni_version, f), 1};
}

// host-shim could not be asked. ADD, CHECK and GC answer "try again later".
// DEL does too, although the spec asks DEL to succeed when there is nothing
// left to do: without host-shim we cannot know that, and the VF, its
// allocation record and the DPU attachment can only be freed by host-shim.
// Reporting success would make the runtime forget the attachment and leak the
// VF; code 11 makes kubelet/podman retry the DEL (GC is the backstop).
// STATUS answers the spec's 50: the plugin cannot serve ADD now.
Failure unreachable(const Invocation& inv, const std::string& why) {
  std::string details = "host-shim at " + inv.socket + " did not answer: " + why +
                        ". Check that the host-shim daemon runs on this node (its DaemonSet pod, or "
                        "`systemctl status host-shim`) and that \"socket\" in the network configuration names its socket";
  if (inv.verb == Verb::kStatus) {
    return fail(ErrorCode::kPluginNotAvailable, "dpu-cni is not available: host-shim is unreachable", details);
  }
  return fail(ErrorCode::kTryAgainLater, "host-shim is unreachable, try again later", details);
}

}  // namespace

Transport unixSocketTransport() {
  return [](const std::string& socket, const v1::CniRequest& request,
            ipc::Deadline deadline) -> Result<v1::CniResponse> {
    // One answer is a few hundred bytes; a large frame means a confused peer.
    return ipc::call<v1::CniResponse>(socket, request, deadline, 1u << 20);
  };
}

v1::CniRequest buildRequest(const Invocation& inv) {
  v1::CniRequest req;
  req.set_command(commandOf(inv.verb));
  req.set_container_id(inv.container_id);
  req.set_netns(inv.netns);
  req.set_ifname(inv.ifname);
  auto* pod = req.mutable_pod();
  pod->set_namespace_(inv.pod.pod_namespace);
  pod->set_name(inv.pod.pod_name);
  pod->set_uid(inv.pod.pod_uid);
  pod->set_infra_container_id(inv.pod.infra_container_id);
  req.set_network_name(inv.network_name);
  req.set_cni_version(inv.cni_version);
  req.set_device_id(inv.device_id);
  req.set_requested_mac(inv.requested_mac);
  for (const auto& ip : inv.requested_ips) req.add_requested_ips(ip);
  req.set_requested_mtu(inv.mtu);
  if (inv.prev_result) req.set_prev_result_json(inv.prev_result->dump());
  for (const auto& a : inv.valid_attachments) {
    auto* ref = req.add_valid_attachments();
    ref->set_container_id(a.container_id);
    ref->set_ifname(a.ifname);
  }
  return req;
}

Outcome run(const EnvLookup& env, std::string_view stdin_text, const Transport& transport) {
  Invocation inv;
  auto bad = parseInvocation(env, stdin_text, inv);
  // The configuration's logFile and logLevel hold for a refusal too, whenever
  // they could be read: the operator looks for it where they asked.
  if (!inv.log_file.empty()) {
    if (auto opened = log::setFile(inv.log_file); !opened) {
      // Logging is not worth failing a pod over: say so on stderr and go on.
      DPU_LOG(kWarn, kLog) << opened.error();
    }
  }
  if (auto level = log::parseLevel(inv.log_level)) log::setLevel(*level);
  if (bad) {
    DPU_LOG(kWarn, kLog) << "refused " << env("CNI_COMMAND").value_or("(no CNI_COMMAND)") << " "
                         << env("CNI_CONTAINERID").value_or("") << ": " << bad->msg << ": " << bad->details;
    return failed(inv.cni_version, *bad);
  }
  if (inv.verb == Verb::kVersion) return Outcome{renderVersion(inv.cni_version), 0};

  double seconds = inv.timeout_seconds;
  if (inv.verb == Verb::kStatus) seconds = std::min(seconds, kStatusTimeoutSeconds);
  auto deadline = ipc::after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  auto answer = transport(inv.socket, buildRequest(inv), deadline);
  if (!answer) {
    DPU_LOG(kError, kLog) << verbName(inv.verb) << " " << inv.container_id << "/" << inv.ifname << ": "
                          << answer.error();
    return failed(inv.cni_version, unreachable(inv, answer.error()));
  }
  const v1::CniResponse& response = *answer;
  if (response.has_error()) {
    const auto& e = response.error();
    DPU_LOG(kWarn, kLog) << verbName(inv.verb) << " " << inv.container_id << "/" << inv.ifname
                         << " failed in host-shim: code " << e.code() << ": " << e.msg() << ": " << e.details();
    // A code of 0 would read as success to a runtime that looks only at the code.
    Failure f{e.code() == 0 ? static_cast<uint32_t>(ErrorCode::kInternal) : e.code(), e.msg(), e.details()};
    return failed(inv.cni_version, f);
  }
  if (!response.has_result()) {
    return failed(inv.cni_version, fail(ErrorCode::kInternal, "host-shim answered without a result or an error",
                                        "host-shim and dpu-cni may be different versions: upgrade both together"));
  }
  DPU_LOG(kInfo, kLog) << verbName(inv.verb) << " " << inv.container_id << "/" << inv.ifname << " done";
  if (inv.verb != Verb::kAdd) return Outcome{"", 0};

  const nlohmann::ordered_json* dns = inv.dns ? &*inv.dns : nullptr;
  auto ours = renderResult(response.result(), inv.cni_version, dns);
  if (inv.prev_result) ours = mergeResults(*inv.prev_result, ours, inv.cni_version);
  return Outcome{ours.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", 0};
}

}  // namespace dpu::cni
