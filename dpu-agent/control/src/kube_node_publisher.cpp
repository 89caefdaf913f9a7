// The Node annotations this DPU publishes (see kube_node_publisher.h).
#include "kube_node_publisher.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/net_address.h"
#include "control/kube_objects.h"

namespace dpu::control::kube {

namespace http = web::http;

Result<void> NodePublisher::publish(const SelfEntry& self) {
  std::string node = self.node_name.empty() ? node_name_ : self.node_name;
  if (node.empty())
    return Error{"publishSelf: no node name; set node_name in the Kubernetes source config", ErrorCode::kInvalid};
  if (self.tunnel_ip.empty()) return Error{"publishSelf: no tunnel IP to publish for node " + node, ErrorCode::kInvalid};
  if (!IpAddress::parse(self.tunnel_ip).ok())
    return Error{"publishSelf: tunnel IP '" + self.tunnel_ip + "' is not an IP address", ErrorCode::kInvalid};
  nlohmann::json annotations = {{kTunnelIpAnnotation, self.tunnel_ip}};
  // The key and its epoch together, or neither (null deletes them): a node
  // with IPsec off, or whose key is not installed yet, names no key.
  const bool keyed = !self.ipsec_public_key.empty();
  annotations[kIpsecPublicKeyAnnotation] = keyed ? nlohmann::json(self.ipsec_public_key) : nlohmann::json();
  annotations[kIpsecEpochAnnotation] = keyed ? nlohmann::json(std::to_string(self.ipsec_epoch)) : nlohmann::json();
  annotations[kIpsecModeAnnotation] =
      keyed && !self.ipsec_mode.empty() ? nlohmann::json(self.ipsec_mode) : nlohmann::json();
  // Where peers reach this node behind a NAT (null deletes it: no NAT any more).
  annotations[kIpsecNatAddressAnnotation] =
      self.ipsec_nat_address.empty() ? nlohmann::json() : nlohmann::json(self.ipsec_nat_address);
  annotations[kPortKeysAnnotation] = formatPortKeysAnnotation(self.port_keys);
  nlohmann::json patch = {{"metadata", {{"annotations", annotations}}}};
  std::string path = std::string("/api/v1/nodes/") + web::uri::encode_data_string(node);
  auto resp = transport_.send(Transport::Use::kRequest, http::methods::PATCH, path, patch.dump(),
                              "application/merge-patch+json");
  if (!resp.ok()) return prefixed("patching Node " + node, std::move(resp).takeError());
  auto code = resp->status_code();
  std::string body = Transport::bodyText(*resp);
  if (code == http::status_codes::NotFound)
    return Error{"patching Node " + node + ": the API server has no such Node; check node_name", ErrorCode::kNotFound};
  if (code < 200 || code >= 300) return Error{"patching Node " + node + ": " + Transport::httpError(code, body)};
  // Said once; later patches follow attaches and detaches (their port keys).
  if (published_.exchange(true)) {
    DPU_LOG(kDebug, "kube") << "published " << self.port_keys.size() << " port keys on Node " << node;
  } else {
    DPU_LOG(kInfo, "kube") << "published " << kTunnelIpAnnotation << "=" << self.tunnel_ip << " on Node " << node;
  }
  return {};
}

}  // namespace dpu::control::kube
