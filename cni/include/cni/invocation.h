// One dpu-cni invocation, fully validated before anything is forwarded: the
// CNI_* environment, CNI_ARGS, and the network configuration on stdin, checked
// the way the CNI spec (1.1.0, also 1.0.0 and 0.4.0) asks for each verb. Every
// refusal is a Failure with the spec's code and a details text naming the
// variable or field to fix. No I/O here except a stat() of CNI_NETNS.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cni/failure.h"

namespace dpu::cni {

enum class Verb { kAdd, kDel, kCheck, kStatus, kGc, kVersion };
std::string_view verbName(Verb v);

inline constexpr std::string_view kDefaultSocket = "/run/dpu-cni/host-shim.sock";
inline constexpr double kDefaultTimeoutSeconds = 20.0;
// What stdin may hold. A network configuration is a few KB; prevResult and
// GC's list of valid attachments add tens. The caps are checked on the raw
// bytes before a JSON tree is built, so a hostile or broken runtime cannot
// make the plugin allocate in proportion to its nesting.
inline constexpr size_t kMaxConfigBytes = 256 * 1024;
inline constexpr size_t kMaxConfigDepth = 64;  // nested objects and arrays

// CNI_ARGS (K8S_* as kubelet/CRI runtimes and podman pass them).
struct PodArgs {
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  std::string infra_container_id;
};

struct Attachment {
  std::string container_id;
  std::string ifname;
};

struct Invocation {
  Verb verb = Verb::kVersion;
  // Environment.
  std::string container_id;
  std::string netns;
  std::string ifname;
  std::string cni_path;
  PodArgs pod;
  // Network configuration.
  std::string cni_version;  // the version every answer is printed in
  std::string network_name;
  std::string plugin_type;
  std::string socket = std::string(kDefaultSocket);
  uint32_t mtu = 0;          // 0: the DPU's pod MTU
  // Both set also when the invocation is refused, if they could be read and
  // are valid, so that the refusal is logged where the operator asked.
  std::string log_file;      // empty: stderr
  std::string log_level = "warn";
  double timeout_seconds = kDefaultTimeoutSeconds;
  std::string device_id;     // normalized PCI address, empty: host-shim picks
  std::string requested_mac; // normalized, empty: not asked
  std::vector<std::string> requested_ips;  // runtimeConfig.ips, addresses only, empty: not asked
  std::optional<nlohmann::ordered_json> prev_result;  // an object when present
  std::optional<nlohmann::ordered_json> dns;          // the config's "dns", a fallback for the result
  std::vector<Attachment> valid_attachments;  // GC
};

// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup processEnvironment();

// Parses and validates everything. On failure `out.cni_version` holds what the
// error should echo (the config's version when it could be read).
std::optional<Failure> parseInvocation(const EnvLookup& env, std::string_view stdin_text, Invocation& out);

// Pieces, exposed for tests and the fuzz target.
std::optional<Failure> parseCniArgs(std::string_view text, PodArgs& out);
std::optional<Failure> checkIfname(std::string_view ifname);
std::optional<Failure> checkContainerId(std::string_view id);
bool isValidName(std::string_view name);  // network names and container ids
// "0000:03:00.2" or "03:00.2" → "0000:03:00.2"; nullopt when not a PCI address.
std::optional<std::string> normalizePciAddress(std::string_view text);
// Only the stdin part (no environment), as the fuzz target drives it.
std::optional<Failure> parseNetworkConfig(Verb verb, std::string_view stdin_text, Invocation& out);
// stdin over kMaxConfigBytes, or JSON nested deeper than kMaxConfigDepth (a
// scan of the bytes: strings and escapes are skipped, nothing is allocated).
std::optional<Failure> checkConfigLimits(std::string_view stdin_text);

}  // namespace dpu::cni
