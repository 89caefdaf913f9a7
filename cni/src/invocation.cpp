// Validation of one dpu-cni invocation (see invocation.h). The order follows
// libcni's skel so runtimes see the codes they expect: the command, then the
// stdin JSON (6), the required environment (4), the version (1), our fields
// (7, 2), and last the one check that touches the system (CNI_NETNS exists).
#include "cni/invocation.h"

#include <sys/statfs.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cni/versions.h"
#include "common/config_doc.h"
#include "common/net_address.h"

namespace dpu::cni {
namespace {

using nlohmann::json;

// NSFS_MAGIC from <linux/magic.h>: what a netns file (bind mount or /proc/<pid>/ns/net) reports.
constexpr long kNsfsMagic = 0x6e736673;
constexpr size_t kMaxIfname = 15;  // IFNAMSIZ - 1

std::string versionList() {
  std::string out;
  for (auto v : supportedVersions()) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

std::optional<Verb> parseVerb(std::string_view s) {
  if (s == "ADD") return Verb::kAdd;
  if (s == "DEL") return Verb::kDel;
  if (s == "CHECK") return Verb::kCheck;
  if (s == "STATUS") return Verb::kStatus;
  if (s == "GC") return Verb::kGc;
  if (s == "VERSION") return Verb::kVersion;
  return std::nullopt;
}

Failure invalidConfig(const std::string& what) {
  return fail(ErrorCode::kInvalidConfig, "invalid network configuration",
              what + " (fix the network configuration: the conflist, or the NetworkAttachmentDefinition)");
}

bool parseBoolArg(std::string_view v, bool& out) {
  std::string lower(v);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "1" || lower == "true") return out = true, true;
  if (lower == "0" || lower == "false") return out = false, true;
  return false;
}

bool isHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// Reads a device id field (PCI address); records an error in the reader when malformed.
std::string readDeviceId(FieldReader& r, std::string_view key) {
  if (!r.has(key)) {
    r.raw(key);
    return {};
  }
  std::string text = r.str(key, "");
  if (!r.ok()) return {};
  auto pci = normalizePciAddress(text);
  if (!pci) {
    r.fail(key, "\"" + text + "\" is not a PCI address; expected the VF's address as in \"0000:03:00.2\"");
    return {};
  }
  return *pci;
}

std::optional<Failure> checkPrevResult(const json& prev) {
  if (!prev.is_object()) return invalidConfig("prevResult must be an object (a CNI result)");
  for (const char* key : {"interfaces", "ips", "routes"}) {
    auto it = prev.find(key);
    if (it == prev.end() || it->is_null()) continue;
    if (!it->is_array()) return invalidConfig(std::string("prevResult.") + key + " must be a list");
    for (const auto& e : *it) {
      if (!e.is_object()) return invalidConfig(std::string("prevResult.") + key + " must be a list of objects");
    }
  }
  if (auto it = prev.find("dns"); it != prev.end() && !it->is_null() && !it->is_object()) {
    return invalidConfig("prevResult.dns must be an object");
  }
  return std::nullopt;
}

// logFile and logLevel, read before anything else can refuse the
// configuration, and only when valid; the strict read below checks them again.
void readLogSettings(const json& doc, Invocation& out) {
  if (auto f = doc.find("logFile"); f != doc.end() && f->is_string()) {
    const auto& path = f->get_ref<const std::string&>();
    if (!path.empty() && path[0] == '/') out.log_file = path;
  }
  if (auto l = doc.find("logLevel"); l != doc.end() && l->is_string()) {
    const auto& level = l->get_ref<const std::string&>();
    if (level == "debug" || level == "info" || level == "warn" || level == "error") out.log_level = level;
  }
}

}  // namespace

std::optional<Failure> checkConfigLimits(std::string_view text) {
  if (text.size() > kMaxConfigBytes) {
    return fail(ErrorCode::kDecodeFailure, "the network configuration is too large",
                "stdin holds more than " + std::to_string(kMaxConfigBytes) +
                    " bytes; dpu-cni reads network configurations of at most " + std::to_string(kMaxConfigBytes / 1024) +
                    " KiB: pass the plugin's own configuration object, not a whole file or a stream");
  }
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxConfigDepth) {
        return fail(ErrorCode::kDecodeFailure, "the network configuration is nested too deeply",
                    "stdin nests objects and arrays more than " + std::to_string(kMaxConfigDepth) +
                        " levels deep (at byte " + std::to_string(i) +
                        "); a network configuration is a few levels deep: fix whatever wrote it");
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::string_view verbName(Verb v) {
  switch (v) {
    case Verb::kAdd: return "ADD";
    case Verb::kDel: return "DEL";
    case Verb::kCheck: return "CHECK";
    case Verb::kStatus: return "STATUS";
    case Verb::kGc: return "GC";
    case Verb::kVersion: return "VERSION";
  }
  return "?";
}

EnvLookup processEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

bool isValidName(std::string_view name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

std::optional<Failure> checkContainerId(std::string_view id) {
  if (!isValidName(id)) {
    return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_CONTAINERID",
                "CNI_CONTAINERID=\"" + std::string(id) +
                    "\" must start with a letter or digit followed by letters, digits, '_', '.' or '-'");
  }
  return std::nullopt;
}

// The kernel's dev_valid_name(): at most IFNAMSIZ-1 bytes, not "." or "..",
// no '/', ':' or whitespace. libcni's ValidateInterfaceName refuses the same
// names with code 4 (invalid environment variable), so do we.
std::optional<Failure> checkIfname(std::string_view ifname) {
  std::string quoted = "CNI_IFNAME=\"" + std::string(ifname) + "\"";
  if (ifname.size() > kMaxIfname) {
    return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_IFNAME",
                quoted + " is " + std::to_string(ifname.size()) +
                    " characters; Linux interface names have at most 15: choose a shorter name");
  }
  if (ifname.empty() || ifname == "." || ifname == "..") {
    return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_IFNAME", quoted + " is not a valid interface name");
  }
  for (char c : ifname) {
    if (c == '/' || c == ':' || std::isspace(static_cast<unsigned char>(c)) || c == '\0') {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_IFNAME",
                  quoted + " contains '/', ':' or whitespace, which interface names cannot");
    }
  }
  return std::nullopt;
}

std::optional<std::string> normalizePciAddress(std::string_view text) {
  // DDDD:BB:DD.F (domain optional), hex; device 0-1f, function 0-7.
  std::string s(text);
  if (s.size() == 7) s = "0000:" + s;
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return std::nullopt;
  for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u, 11u}) {
    if (!isHex(s[i])) return std::nullopt;
  }
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int device = std::stoi(s.substr(8, 2), nullptr, 16);
  int function = s[11] - '0';
  if (device > 0x1f || function < 0 || function > 7) return std::nullopt;
  return s;
}

std::optional<Failure> parseCniArgs(std::string_view text, PodArgs& out) {
  bool ignore_unknown = false;
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  while (!text.empty()) {
    size_t semi = text.find(';');
    std::string_view item = text.substr(0, semi);
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (item.empty()) continue;  // "A=1;" — a trailing separator is harmless
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_ARGS",
                  "CNI_ARGS element \"" + std::string(item) + "\" is not KEY=VALUE; CNI_ARGS is \"K1=V1;K2=V2\"");
    }
    pairs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  // IgnoreUnknown applies wherever it appears in the list.
  for (auto& [k, v] : pairs) {
    if (k == "IgnoreUnknown" && !parseBoolArg(v, ignore_unknown)) {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_ARGS",
                  "CNI_ARGS IgnoreUnknown=\"" + std::string(v) + "\" must be 1, 0, true or false");
    }
  }
  for (auto& [k, v] : pairs) {
    if (k == "K8S_POD_NAMESPACE") out.pod_namespace = v;
    else if (k == "K8S_POD_NAME") out.pod_name = v;
    else if (k == "K8S_POD_UID") out.pod_uid = v;
    else if (k == "K8S_POD_INFRA_CONTAINER_ID") out.infra_container_id = v;
    else if (k == "IgnoreUnknown") continue;
    else if (!ignore_unknown) {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_ARGS",
                  "CNI_ARGS has the unknown key \"" + std::string(k) +
                      "\"; dpu-cni knows K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID and "
                      "K8S_POD_INFRA_CONTAINER_ID; add IgnoreUnknown=1 to pass others through");
    }
  }
  return std::nullopt;
}

std::optional<Failure> parseNetworkConfig(Verb verb, std::string_view stdin_text, Invocation& out) {
  if (auto too_much = checkConfigLimits(stdin_text)) return too_much;
  json doc = json::parse(stdin_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return fail(ErrorCode::kDecodeFailure, "cannot decode the network configuration",
                "stdin is not valid JSON; the runtime must pass the plugin's network configuration object");
  }
  if (!doc.is_object()) {
    return fail(ErrorCode::kDecodeFailure, "cannot decode the network configuration",
                "stdin must be a JSON object (the network configuration), not " + std::string(doc.type_name()));
  }
  readLogSettings(doc, out);

  // Version first: the error JSON echoes it.
  auto ver = doc.find("cniVersion");
  bool has_version = ver != doc.end() && !ver->is_null();
  if (has_version && !ver->is_string()) {
    return fail(ErrorCode::kDecodeFailure, "cannot decode the network configuration",
                "cniVersion must be a string such as \"1.1.0\", not " + ver->dump());
  }
  std::vector<std::string> offered;
  if (auto vs = doc.find("cniVersions"); vs != doc.end() && !vs->is_null()) {
    if (!vs->is_array()) return invalidConfig("cniVersions must be a list of version strings");
    for (const auto& v : *vs) {
      if (!v.is_string()) return invalidConfig("cniVersions must be a list of version strings");
      offered.push_back(v.get<std::string>());
    }
  }
  if (has_version) {
    out.cni_version = ver->get<std::string>();
    if (!isSupported(out.cni_version)) {
      return fail(ErrorCode::kIncompatibleVersion, "incompatible CNI versions",
                  "cniVersion \"" + out.cni_version + "\" is not supported; dpu-cni supports " + versionList());
    }
  } else if (!offered.empty()) {
    // CNI 1.1.0: the runtime picks from cniVersions; a plugin given only the list does the same.
    auto best = highestCommon(offered);
    if (!best) {
      return fail(ErrorCode::kIncompatibleVersion, "incompatible CNI versions",
                  "none of cniVersions is supported; dpu-cni supports " + versionList());
    }
    out.cni_version = *best;
  } else {
    // libcni reads a missing cniVersion as 0.1.0, which we do not speak.
    return fail(ErrorCode::kIncompatibleVersion, "incompatible CNI versions",
                "the network configuration has no cniVersion (read as 0.1.0); set \"cniVersion\" to one of " +
                    versionList());
  }
  if (verb == Verb::kCheck && !allowsCheck(out.cni_version)) {
    return fail(ErrorCode::kIncompatibleVersion, "config version does not allow CHECK",
                "CHECK exists from CNI 0.4.0; this configuration is " + out.cni_version);
  }

  FieldReader r(doc, "");
  out.network_name = r.str("name");
  out.plugin_type = r.str("type");
  r.str("cniVersion", "");
  r.raw("cniVersions");
  out.socket = r.str("socket", std::string(kDefaultSocket));
  out.mtu = static_cast<uint32_t>(r.uint("mtu", 576, 9216, 0));
  // Into out only once checked (readLogSettings took the valid ones already).
  std::string log_file = r.str("logFile", "");
  std::string log_level = r.str("logLevel", "warn");
  out.timeout_seconds = r.number("timeout", 0.1, 600, kDefaultTimeoutSeconds);
  std::string top_device = readDeviceId(r, "deviceID");
  std::string top_pci = readDeviceId(r, "pciBusID");
  FieldReader rc = r.object("runtimeConfig", /*optional=*/true);
  std::string rc_device = readDeviceId(rc, "deviceID");
  std::string mac_text = rc.str("mac", "");
  std::vector<std::string> ips_text = rc.strings("ips");
  const json* prev = r.raw("prevResult");
  const json* dns = r.raw("dns");
  const json* ipam = r.raw("ipam");
  const json* args = r.raw("args");
  const json* attachments = r.raw("cni.dev/valid-attachments");
  if (!r.ok()) return invalidConfig(r.error());
  if (out.network_name.empty()) {
    return invalidConfig("name must name the network (attachments are kept per network name); it is empty");
  }
  if (!isValidName(out.network_name)) {
    return invalidConfig("name \"" + out.network_name +
                         "\" must start with a letter or digit followed by letters, digits, '_', '.' or '-'");
  }
  if (out.plugin_type.empty()) return invalidConfig("type must name the plugin binary");
  if (out.socket.empty() || out.socket[0] != '/') {
    return invalidConfig("socket \"" + out.socket + "\" must be an absolute path to host-shim's unix socket");
  }
  if (!log_file.empty() && log_file[0] != '/') {
    return invalidConfig("logFile \"" + log_file + "\" must be an absolute path");
  }
  if (log_level != "debug" && log_level != "info" && log_level != "warn" && log_level != "error") {
    return invalidConfig("logLevel \"" + log_level + "\" must be debug, info, warn or error");
  }
  out.log_file = log_file;
  out.log_level = log_level;
  if (!mac_text.empty()) {
    auto mac = MacAddress::parse(mac_text);
    if (!mac) return invalidConfig("runtimeConfig.mac: " + mac.error());
    if (mac->isZero() || mac->isMulticast()) {
      return invalidConfig("runtimeConfig.mac \"" + mac_text + "\" must be a unicast, non-zero MAC address");
    }
    out.requested_mac = mac->str();
  }
  // The `ips` capability: "10.244.1.7/24" or "10.244.1.7"; the DPU agent
  // owns the prefix (its pod CIDR) and checks the address is free.
  bool ip_family_seen[2] = {false, false};
  for (const auto& text : ips_text) {
    auto ifa = IpInterfaceAddress::parse(text);
    auto ip = ifa ? Result<IpAddress>(ifa->address) : IpAddress::parse(text);
    if (!ip) return invalidConfig("runtimeConfig.ips: \"" + text + "\" is not an IP address or CIDR");
    bool& seen = ip_family_seen[ip->isV4() ? 0 : 1];
    if (seen) return invalidConfig("runtimeConfig.ips: at most one address per IP family");
    seen = true;
    out.requested_ips.push_back(ip->str());
  }
  // runtimeConfig.deviceID (a capability the runtime fills) wins over what a
  // meta-plugin (Multus) injects at the top level.
  out.device_id = !rc_device.empty() ? rc_device : !top_device.empty() ? top_device : top_pci;
  if (ipam && !(ipam->is_object() && ipam->empty())) {
    return fail(ErrorCode::kUnsupportedField, "unsupported field in network configuration",
                "\"ipam\": " + ipam->dump() +
                    " — dpu-cni takes pod addresses from the DPU agent; remove \"ipam\" from the configuration");
  }
  if (args && !args->is_object()) return invalidConfig("args must be an object");
  if (dns) {
    if (!dns->is_object()) return invalidConfig("dns must be an object");
    for (const char* key : {"nameservers", "search", "options"}) {
      if (auto it = dns->find(key); it != dns->end() && !it->is_null()) {
        bool ok = it->is_array();
        for (const auto& e : ok ? *it : json::array()) ok = ok && e.is_string();
        if (!ok) return invalidConfig(std::string("dns.") + key + " must be a list of strings");
      }
    }
    if (auto it = dns->find("domain"); it != dns->end() && !it->is_null() && !it->is_string()) {
      return invalidConfig("dns.domain must be a string");
    }
    out.dns = nlohmann::ordered_json(*dns);
  }
  if (prev) {
    if (auto bad = checkPrevResult(*prev)) return bad;
    out.prev_result = nlohmann::ordered_json(*prev);
  }
  if (verb == Verb::kCheck && !out.prev_result) {
    return invalidConfig("CHECK needs prevResult (the result of ADD); the runtime must pass it");
  }
  if (verb == Verb::kGc) {
    // Without the list GC would free every attachment on the host: refuse.
    if (!attachments) {
      return invalidConfig("GC needs cni.dev/valid-attachments (the attachments to keep); the runtime must pass it");
    }
    if (!attachments->is_array()) return invalidConfig("cni.dev/valid-attachments must be a list");
    for (size_t i = 0; i < attachments->size(); ++i) {
      FieldReader a((*attachments)[i], "cni.dev/valid-attachments[" + std::to_string(i) + "]");
      Attachment att{a.str("containerID"), a.str("ifname")};
      if (auto done = a.finish(/*allow_unknown=*/true); !done) return invalidConfig(done.error());
      out.valid_attachments.push_back(std::move(att));
    }
  }
  // Other plugins' fields may share the object (CNI practice): unknown keys pass.
  if (auto done = rc.finish(true); !done) return invalidConfig(done.error());
  if (auto done = r.finish(true); !done) return invalidConfig(done.error());
  return std::nullopt;
}

std::optional<Failure> parseInvocation(const EnvLookup& env, std::string_view stdin_text, Invocation& out) {
  out.cni_version = std::string(kNewestVersion);
  auto command = env("CNI_COMMAND");
  if (!command || command->empty()) {
    return fail(ErrorCode::kInvalidEnvironment, "required env variables [CNI_COMMAND] missing",
                "set CNI_COMMAND to ADD, DEL, CHECK, STATUS, GC or VERSION");
  }
  auto verb = parseVerb(*command);
  if (!verb) {
    return fail(ErrorCode::kInvalidEnvironment, "unknown CNI_COMMAND: " + *command,
                "CNI_COMMAND must be ADD, DEL, CHECK, STATUS, GC or VERSION");
  }
  out.verb = *verb;
  if (out.verb == Verb::kVersion) {
    // The input's cniVersion is echoed back; anything unreadable (or over the
    // limits, so never parsed) is ignored, as skel does.
    json doc = checkConfigLimits(stdin_text) ? json() : json::parse(stdin_text, nullptr, false);
    if (doc.is_object()) {
      if (auto v = doc.find("cniVersion"); v != doc.end() && v->is_string() && !v->get<std::string>().empty()) {
        out.cni_version = v->get<std::string>();
      }
    }
    return std::nullopt;
  }

  // The spec's required variables per verb (CNI 1.1.0 section 2). CNI_PATH is
  // optional for ADD/DEL/CHECK (we delegate to no other plugin) but required
  // for STATUS and GC.
  struct Var {
    const char* name;
    std::string* into;
    bool required;
  };
  bool attach = out.verb == Verb::kAdd || out.verb == Verb::kCheck || out.verb == Verb::kDel;
  bool needs_netns = out.verb == Verb::kAdd || out.verb == Verb::kCheck;
  Var vars[] = {
      {"CNI_CONTAINERID", &out.container_id, attach},
      {"CNI_NETNS", &out.netns, needs_netns},
      {"CNI_IFNAME", &out.ifname, attach},
      {"CNI_PATH", &out.cni_path, !attach},
  };
  std::string missing;
  for (auto& v : vars) {
    auto value = env(v.name);
    *v.into = value.value_or("");
    if (v.required && v.into->empty()) missing += missing.empty() ? v.name : std::string(",") + v.name;
  }

  // Read the config before reporting env errors only to learn the version to echo.
  Invocation probe;
  auto config_failure = parseNetworkConfig(out.verb, stdin_text, probe);
  if (!probe.cni_version.empty()) out.cni_version = probe.cni_version;
  out.log_file = probe.log_file;
  out.log_level = probe.log_level;
  if (config_failure && config_failure->code == static_cast<uint32_t>(ErrorCode::kDecodeFailure)) {
    return config_failure;
  }
  if (!missing.empty()) {
    return fail(ErrorCode::kInvalidEnvironment, "required env variables [" + missing + "] missing",
                "CNI " + std::string(verbName(out.verb)) + " needs " + missing + " set by the runtime");
  }
  if (attach) {
    if (auto bad = checkContainerId(out.container_id)) return bad;
    if (auto bad = checkIfname(out.ifname)) return bad;
  }
  if (auto cni_args = env("CNI_ARGS"); cni_args && attach) {
    if (auto bad = parseCniArgs(*cni_args, out.pod)) return bad;
  }
  if (config_failure) return config_failure;
  // Keep the environment we read, take the config.
  probe.verb = out.verb;
  probe.container_id = std::move(out.container_id);
  probe.netns = std::move(out.netns);
  probe.ifname = std::move(out.ifname);
  probe.cni_path = std::move(out.cni_path);
  probe.pod = std::move(out.pod);
  out = std::move(probe);

  if (needs_netns) {
    struct statfs fs {};
    if (::statfs(out.netns.c_str(), &fs) != 0) {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_NETNS",
                  "CNI_NETNS=\"" + out.netns + "\" does not exist: " + std::strerror(errno) +
                      "; the runtime must create the pod's network namespace before ADD");
    }
    if (fs.f_type != kNsfsMagic) {
      return fail(ErrorCode::kInvalidEnvironment, "invalid CNI_NETNS",
                  "CNI_NETNS=\"" + out.netns + "\" is not a network namespace (not an nsfs file)");
    }
  }
  return std::nullopt;
}

}  // namespace dpu::cni
