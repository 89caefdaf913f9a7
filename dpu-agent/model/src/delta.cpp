// The Delta arithmetic on a requested logical model (model.h).
#include "model/model.h"

namespace dpu::model {

Result<dpv1::LogicalModel> applyDelta(const dpv1::LogicalModel& base, const dpv1::Delta& delta) {
  dpv1::LogicalModel out = base;
  if (delta.has_node()) *out.mutable_node() = delta.node();

  auto removeBy = [](auto* list, const std::string& key, auto keyOf, const std::string& what) -> Result<void> {
    for (int i = 0; i < list->size(); ++i) {
      if (keyOf(list->Get(i)) == key) {
        list->DeleteSubrange(i, 1);
        return {};
      }
    }
    return Error{"delta deletes " + what + " " + key + ", which the dataplane does not have: send a FullSync",
                 ErrorCode::kNotFound};
  };
  auto upsertBy = [](auto* list, const auto& item, auto keyOf) {
    for (int i = 0; i < list->size(); ++i) {
      if (keyOf(list->Get(i)) == keyOf(item)) {
        *list->Mutable(i) = item;
        return;
      }
    }
    *list->Add() = item;
  };
  auto portName = [](const dpv1::LogicalPort& p) { return p.name(); };
  auto subnetCidr = [](const dpv1::Subnet& s) { return s.cidr(); };
  auto nodeName = [](const dpv1::RemoteNode& n) { return n.name(); };
  auto serviceName = [](const dpv1::Service& v) { return v.name(); };

  for (const auto& name : delta.delete_ports()) {
    if (auto r = removeBy(out.mutable_ports(), name, portName, "port"); !r) return std::move(r).takeError();
  }
  for (const auto& cidr : delta.delete_local_subnets()) {
    if (auto r = removeBy(out.mutable_local_subnets(), cidr, subnetCidr, "local subnet"); !r) {
      return std::move(r).takeError();
    }
  }
  for (const auto& name : delta.delete_remote_nodes()) {
    if (auto r = removeBy(out.mutable_remote_nodes(), name, nodeName, "remote node"); !r) {
      return std::move(r).takeError();
    }
  }
  auto saName = [](const dpv1::IpsecSa& s) { return s.name(); };
  for (const auto& name : delta.delete_ipsec_sas()) {
    if (auto r = removeBy(out.mutable_ipsec_sas(), name, saName, "IPsec SA"); !r) return std::move(r).takeError();
  }
  for (const auto& name : delta.delete_services()) {
    if (auto r = removeBy(out.mutable_services(), name, serviceName, "service"); !r) return std::move(r).takeError();
  }
  auto policyPort = [](const dpv1::PortPolicy& p) { return p.port(); };
  for (const auto& port : delta.delete_port_policies()) {
    if (auto r = removeBy(out.mutable_port_policies(), port, policyPort, "the port policy of port"); !r) {
      return std::move(r).takeError();
    }
  }
  for (const auto& s : delta.upsert_local_subnets()) upsertBy(out.mutable_local_subnets(), s, subnetCidr);
  for (const auto& p : delta.upsert_ports()) upsertBy(out.mutable_ports(), p, portName);
  for (const auto& n : delta.upsert_remote_nodes()) upsertBy(out.mutable_remote_nodes(), n, nodeName);
  for (const auto& s : delta.upsert_ipsec_sas()) upsertBy(out.mutable_ipsec_sas(), s, saName);
  for (const auto& v : delta.upsert_services()) upsertBy(out.mutable_services(), v, serviceName);
  for (const auto& p : delta.upsert_port_policies()) upsertBy(out.mutable_port_policies(), p, policyPort);
  return out;
}

}  // namespace dpu::model
