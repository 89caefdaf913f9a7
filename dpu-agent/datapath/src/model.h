// The logical model as the engine keeps it: the protobuf model from the agent
// (dataplane.proto), validated and parsed once on the control thread, and the
// Delta arithmetic. Nothing here runs on an lcore; snapshot.h turns a Model
// into the immutable tables the lcores read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {

// The OVN option's egress key for "the distributed router": a packet routed
// to a remote node whose destination port the sender does not know (remote
// nodes publish subnets, not ports). Outside the 15-bit range of port keys,
// so it never names a port.
inline constexpr uint16_t kRouterEgressPortKey = 0x8000;
inline constexpr uint32_t kMaxPortKey = 0x7fff;
inline constexpr uint32_t kMaxDatapathKey = 0xffffff;  // 24-bit VNI

struct ModelSubnet {
  IpPrefix prefix;
  IpAddress gateway;
  bool has_gateway = false;
  uint32_t datapath_key = 0;
};

struct ModelPort {
  std::string name;
  uint16_t key = 0;
  dataplane::v1::PortKind kind = dataplane::v1::POD;
  std::string representor;
  MacAddress mac;
  std::vector<IpAddress> ips;
  uint32_t datapath_key = 0;
  std::string content;  // serialized LogicalPort: equal content, unchanged port
};

struct ModelRemoteNode {
  std::string name;
  IpAddress tunnel_ip;
  std::vector<ModelSubnet> subnets;
  std::string content;
};

struct Model {
  bool programmed = false;
  std::string node_name;
  IpAddress tunnel_ip;
  bool has_tunnel_ip = false;
  uint32_t underlay_mtu = 0;
  uint32_t pod_mtu = 1500;
  MacAddress router_mac;
  std::vector<ModelSubnet> local_subnets;
  std::vector<ModelPort> ports;
  std::vector<ModelRemoteNode> remote_nodes;
  std::string node_content;  // serialized NodeSettings and local subnets
};

// Validates everything (addresses, MACs, keys, duplicates, ports naming
// unknown subnets, overlapping subnets) and parses. The error names the
// object and field to fix.
Result<Model> validateModel(const dataplane::v1::LogicalModel& model);

// Applies a Delta to a copy of the model. `resync` is set (and an error
// returned) when the Delta refers to something the model lacks, which means
// the agent and the dataplane disagree about the base: a FullSync repairs it.
Result<dataplane::v1::LogicalModel> applyDelta(const dataplane::v1::LogicalModel& base,
                                               const dataplane::v1::Delta& delta, bool& resync);

}  // namespace dpu::datapath
