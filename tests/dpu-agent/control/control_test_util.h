// Shared bits of the control-plane tests: a temporary directory that cleans
// itself up, a config document for one node, and a listener that records.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/agent.h"
#include "control/agent_config.h"
#include "control/cluster_source.h"

namespace dpu::control::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dpu-control-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline nlohmann::json baseConfig(const std::string& state_dir) {
  return nlohmann::json{
      {"nodeName", "node-a"},
      {"tunnelIP", "192.168.50.1"},
      {"representors", {{{"pf", 0}, {"vfCount", 8}, {"name", "pf0vf{vf}"}}}},
      {"podCIDR", "10.244.1.0/24"},
      {"clusterCIDRs", {"10.244.0.0/16"}},
      {"serviceCIDRs", {"10.96.0.0/12"}},
      {"clusterSource", {{"type", "file"}, {"path", "/nonexistent/cluster.yaml"}}},
      {"stateDir", state_dir},
  };
}

// An agent for baseConfig's node, restored from `state_dir` and synced, as it
// serves after start; null if either step fails (the caller REQUIREs it).
inline std::unique_ptr<Agent> readyAgent(const std::string& state_dir, ModelState& model) {
  auto config = parseAgentConfig(baseConfig(state_dir));
  if (!config.ok()) return nullptr;
  auto agent = std::make_unique<Agent>(*config, model, false);
  if (!agent->restore().ok()) return nullptr;
  agent->synced();
  return agent;
}

struct RecordingListener : ClusterListener {
  std::vector<std::string> events;
  std::vector<NodeInfo> nodes;
  int syncs = 0;
  void nodeUpserted(const NodeInfo& n) override {
    events.push_back("+node:" + n.name);
    nodes.push_back(n);
  }
  void nodeDeleted(const std::string& n) override { events.push_back("-node:" + n); }
  void podUpserted(const PodInfo& p) override { events.push_back("+pod:" + p.ns + "/" + p.name); }
  void podDeleted(const std::string& ns, const std::string& n) override { events.push_back("-pod:" + ns + "/" + n); }
  void serviceUpserted(const ServiceInfo& s) override { events.push_back("+svc:" + s.ns + "/" + s.name); }
  void serviceDeleted(const std::string& ns, const std::string& n) override { events.push_back("-svc:" + ns + "/" + n); }
  void endpointSliceUpserted(const EndpointSliceInfo& s) override { events.push_back("+eps:" + s.ns + "/" + s.name); }
  void endpointSliceDeleted(const std::string& ns, const std::string& n) override {
    events.push_back("-eps:" + ns + "/" + n);
  }
  void networkPolicyUpserted(const NetworkPolicyInfo& p) override { events.push_back("+np:" + p.ns + "/" + p.name); }
  void networkPolicyDeleted(const std::string& ns, const std::string& n) override {
    events.push_back("-np:" + ns + "/" + n);
  }
  void namespaceUpserted(const NamespaceInfo& n) override { events.push_back("+ns:" + n.name); }
  void namespaceDeleted(const std::string& n) override { events.push_back("-ns:" + n); }
  void synced() override { ++syncs; }
};

}  // namespace dpu::control::testing
