// The Delta arithmetic on a requested logical model, and the validation of
// a Delta that changes services only, or port policies only, against the
// model in force (model.h).
#include <algorithm>
#include <map>

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

bool changesServicesOnly(const dpv1::Delta& d) {
  return !d.has_node() && d.upsert_ports_size() == 0 && d.delete_ports_size() == 0 &&
         d.upsert_local_subnets_size() == 0 && d.delete_local_subnets_size() == 0 && d.upsert_remote_nodes_size() == 0 &&
         d.delete_remote_nodes_size() == 0 && d.upsert_ipsec_sas_size() == 0 && d.delete_ipsec_sas_size() == 0 &&
         d.upsert_port_policies_size() == 0 && d.delete_port_policies_size() == 0;
}

bool changesPortPoliciesOnly(const dpv1::Delta& d) {
  return !d.has_node() && d.upsert_ports_size() == 0 && d.delete_ports_size() == 0 &&
         d.upsert_local_subnets_size() == 0 && d.delete_local_subnets_size() == 0 && d.upsert_remote_nodes_size() == 0 &&
         d.delete_remote_nodes_size() == 0 && d.upsert_ipsec_sas_size() == 0 && d.delete_ipsec_sas_size() == 0 &&
         d.upsert_services_size() == 0 && d.delete_services_size() == 0;
}

Result<PortPolicyDeltaVerdict> validatePortPolicyDelta(const dpv1::Delta& delta, const Model& in_force,
                                                       const std::vector<dpv1::ObjectProblem>& problems) {
  // applyDelta's order: deletes first, then upserts, the last of a port winning.
  std::map<std::string, const dpv1::PortPolicy*> requested;
  for (const auto& port : delta.delete_port_policies()) requested[port] = nullptr;
  for (const auto& p : delta.upsert_port_policies()) {
    if (p.port().empty()) {
      return Error{"a port policy has an empty port: name the port (its attachment id) it is for", ErrorCode::kInvalid};
    }
    requested[p.port()] = &p;
  }
  const auto& policies = in_force.port_policies;
  PortPolicyDeltaVerdict out;
  for (const auto& [port, p] : requested) {
    auto it = std::lower_bound(policies.begin(), policies.end(), port,
                               [](const ModelPortPolicy& x, const std::string& n) { return x.port < n; });
    const ModelPortPolicy* was = it != policies.end() && it->port == port ? &*it : nullptr;
    if (p == nullptr) {
      out.updates.push_back({port, std::nullopt});
      continue;
    }
    // Its content in force: the same verdict (its port is as it was).
    if (was != nullptr && was->content == p->SerializeAsString()) continue;
    auto parsed = parsePortPolicy(*p);
    const std::string port_problem = portPolicyPortProblem(port, in_force.ports, problems);
    std::string reason = parsed ? port_problem : parsed.error();
    if (reason.empty()) {
      out.updates.push_back({port, std::move(*parsed)});
      continue;
    }
    dpv1::ObjectProblem problem;
    problem.set_kind(dpv1::ObjectProblem::PORT_POLICY);
    problem.set_name(port);
    problem.set_state(dpv1::ObjectProblem::REFUSED);
    problem.set_reason(std::move(reason));
    out.problems.push_back(std::move(problem));
    // Unreadable on a port in force: validate()'s fail-closed policy.
    if (!parsed && port_problem.empty()) {
      out.updates.push_back({port, refusedPortPolicy(*p)});
    } else {
      out.updates.push_back({port, std::nullopt});
    }
  }
  return out;
}

Result<ServiceDeltaVerdict> validateServiceDelta(const dpv1::Delta& delta, const std::vector<ModelService>& in_force,
                                                 const std::vector<const dpv1::Service*>& waiting,
                                                 ServiceClaims& claims) {
  // What the requested model holds for each name the Delta names once it is
  // applied (deletes first, then upserts, the last upsert of a name winning:
  // applyDelta's order). nullptr: deleted.
  std::map<std::string, const dpv1::Service*> requested;
  for (const auto& name : delta.delete_services()) requested[name] = nullptr;
  for (const auto& v : delta.upsert_services()) {
    if (v.name().empty()) {
      return Error{"a service has an empty name: give it \"namespace/name\"", ErrorCode::kInvalid};
    }
    requested[v.name()] = &v;
  }
  auto inForce = [&in_force](const std::string& name) -> const ModelService* {
    auto it = std::lower_bound(in_force.begin(), in_force.end(), name,
                               [](const ModelService& s, const std::string& n) { return s.name < n; });
    return it != in_force.end() && it->name == name ? &*it : nullptr;
  };

  ServiceDeltaVerdict out;
  std::map<std::string, std::optional<ModelService>> fate;
  // Changed services in force (validate()'s second rank), then the others
  // (its third), each by name; unchanged services keep their claims.
  std::map<std::string, const dpv1::Service*> changed, others;
  for (const auto& [name, v] : requested) {
    const ModelService* was = inForce(name);
    if (v == nullptr) {
      if (was != nullptr) claims.release(*was);
      fate[name] = std::nullopt;
      continue;
    }
    if (was != nullptr && was->content == v->SerializeAsString()) continue;
    if (was != nullptr) {
      claims.release(*was);
      changed[name] = v;
    } else {
      others[name] = v;
    }
  }
  for (const auto* v : waiting) {
    if (!requested.count(v->name())) others[v->name()] = v;
  }
  auto settle = [&](const std::string& name, const dpv1::Service& v) {
    auto svc = parseService(v);
    std::string reason;
    if (!svc) {
      reason = svc.error();
    } else if (std::string clash = claims.clash(*svc); !clash.empty()) {
      reason = clash + ", which is in force";
    }
    if (!reason.empty()) {
      dpv1::ObjectProblem p;
      p.set_kind(dpv1::ObjectProblem::SERVICE);
      p.set_name(name);
      p.set_state(dpv1::ObjectProblem::REFUSED);
      p.set_reason(std::move(reason));
      out.problems.push_back(std::move(p));
      fate[name] = std::nullopt;
      return;
    }
    claims.grant(*svc);
    fate[name] = std::move(*svc);
  };
  for (const auto& [name, v] : changed) settle(name, *v);
  for (const auto& [name, v] : others) settle(name, *v);
  std::sort(out.problems.begin(), out.problems.end(),
            [](const dpv1::ObjectProblem& a, const dpv1::ObjectProblem& b) { return a.name() < b.name(); });
  out.updates.reserve(fate.size());
  for (auto& [name, svc] : fate) out.updates.push_back({name, std::move(svc)});
  return out;
}

}  // namespace dpu::model
