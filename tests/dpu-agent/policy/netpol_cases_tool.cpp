// netpol-cases: the upstream netpol cases of netpol_cases.h as JSON, for the
// lab's end-to-end test (tests/lab/lab_netpol_test.sh), so that the lab
// probes the very matrices the unit tests hold the compiler to.
//
//   netpol-cases [IPS]     IPS: a JSON object of pod "ns/name" → address (the
//                          lab's pods; ipBlock cases name them)
//
// prints [{"name", "checks": [{"policies": [cluster file entries],
// "namespaces": {ns: labels}, "pods": {"ns/name": labels}, "protocol",
// "port", "allowed": {"from ns/name": {"to ns/name": bool}}}]}]: each check
// is the whole state the matrix is for, so a consumer sets that state, then
// probes.
#include <iostream>

#include <nlohmann/json.hpp>

#include "control/cluster_objects.h"
#include "netpol_cases.h"

using namespace policytest;

int main(int argc, char** argv) {
  std::map<std::string, std::string> ips;
  if (argc > 1) {
    auto j = nlohmann::json::parse(argv[1], nullptr, false);
    if (!j.is_object()) {
      std::cerr << "netpol-cases: IPS must be a JSON object of \"ns/name\": \"address\"\n";
      return 2;
    }
    for (const auto& [k, v] : j.items()) ips[k] = v.get<std::string>();
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : netpolCases()) {
    Harness h(ips);
    nlohmann::json checks = nlohmann::json::array();
    c.run(h, [&](const Harness& at, const Reachability& want, uint8_t proto, uint16_t port) {
      nlohmann::json check;
      check["policies"] = nlohmann::json::array();
      for (const auto& [k, p] : at.policies) check["policies"].push_back(dpu::control::toJson(p));
      for (const auto& [n, ns] : at.cluster.namespaces) {
        auto labels = ns.labels;
        labels.erase(kNamespaceNameLabel);
        check["namespaces"][n] = labels;
      }
      for (const auto& [k, p] : at.cluster.pods) check["pods"][k] = p.labels;
      check["protocol"] = proto;
      check["port"] = port;
      for (const auto& [cell, v] : want.cells) check["allowed"][cell.first][cell.second] = v;
      checks.push_back(std::move(check));
    });
    out.push_back({{"name", c.name}, {"checks", std::move(checks)}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
