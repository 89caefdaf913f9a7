// host-shim's configuration file (JSON or YAML), validated field by field at
// start so a bad file fails with a message naming the field. Holds the PFs and
// their VF pools, where sysfs and the state live, the CNI socket (its mode, who
// may use it, how many requests it serves at once), how to reach the DPU agent
// (URL, TLS files, timeouts, the reconcile interval), the host management port
// and logging.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dpu::hostshim {

struct PfConfig {
  std::string name;             // the PF netdev, e.g. "p0"
  uint32_t index = 0;           // pf_index in the attach API
  std::set<uint32_t> pool;      // VFs that may be handed to pods
  std::set<uint32_t> reserved;  // never handed to pods (host management port)
};

struct DpuConfig {
  std::string url;        // "https://169.254.0.2:9443" (http:// only with insecure)
  std::string ca_file;    // TLS: the CA that signed the agent's certificate
  std::string cert_file;  // mTLS: our client certificate and key (it names this node)
  std::string key_file;
  // insecure: talk to an agent off this host without mutual TLS (plain HTTP,
  // or https:// without a client certificate); refused otherwise.
  bool insecure = false;
  uint32_t request_timeout_ms = 2000;
  uint32_t health_interval_ms = 1000;
  // How often host-shim sends the agent its list of held attachments (the
  // agent releases the rest); it also does at each (re)connect.
  uint32_t reconcile_interval_ms = 30000;
};

struct ManagementPortConfig {
  bool enabled = false;
  uint32_t pf_index = 0;
  uint32_t vf_index = 0;
  std::string ifname;  // rename the VF to this in the host netns; empty: keep
  std::vector<std::string> cluster_cidrs;
  std::vector<std::string> service_cidrs;
};

struct Config {
  std::string socket_path = "/run/dpu-cni/host-shim.sock";
  // The socket file's mode, set before it appears at socket_path.
  uint32_t socket_mode = 0660;
  // The socket file's group (a gid; a group name in the config is resolved
  // when it is read). Unset: root's. With socket_mode 0660 it is what lets an
  // allowed non-root uid connect without opening the socket to everyone.
  std::optional<uint32_t> socket_group;
  // Peers (SO_PEERCRED) allowed besides root; anyone else is refused.
  std::set<uint32_t> socket_allowed_uids;
  // CNI requests served at once; more are answered "try again later" (11).
  uint32_t max_connections = 64;
  // tmpfs on a normal host: the records live exactly as long as the pods they
  // describe (a reboot ends both), and crash-safe writes there cost no disk flush.
  std::string state_dir = "/run/dpu-cni/host-shim";
  std::string sysfs_root = "/sys";
  std::vector<PfConfig> pfs;
  DpuConfig dpu;
  ManagementPortConfig management;
  std::string log_file;  // empty: stderr
  std::string log_level = "info";
  uint32_t request_timeout_ms = 15000;  // one CNI request, end to end

  const PfConfig* pfByIndex(uint32_t index) const;
};

// "0-7,10,12-13" → {0..7, 10, 12, 13}. Refuses reversed ranges and values over max.
Result<std::set<uint32_t>> parseVfRanges(std::string_view text, uint32_t max = 4095);

Result<Config> parseConfig(std::string_view text, std::string_view origin);
Result<Config> loadConfig(const std::string& path);

}  // namespace dpu::hostshim
