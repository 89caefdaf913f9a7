// The JSON dpu-cni prints: results shaped exactly as the requested CNI version
// defines them, the spec's error object, and the VERSION answer. Chained ADDs
// merge our interface, addresses and routes into the previous plugin's result.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cni/failure.h"
#include "dpu/cni/v1/cni.pb.h"

namespace dpu::cni {

// {"cniVersion":..., "supportedVersions":[...]}
std::string renderVersion(std::string_view cni_version);
// {"cniVersion":..., "code":..., "msg":..., "details":...}
std::string renderError(std::string_view cni_version, const Failure& failure);

// Our result alone, in the shape of `cni_version` (see versions.h): keys in
// libcni's order, empty fields omitted as libcni omits them. `fallback_dns` is
// used when host-shim returns none.
nlohmann::ordered_json renderResult(const dpu::cni::v1::CniResult& result, std::string_view cni_version,
                                    const nlohmann::ordered_json* fallback_dns = nullptr);

// prevResult plus ours: interfaces appended (our ips' "interface" indexes
// shifted past the previous ones), ips and routes appended, dns kept unless
// the previous result had none. Fields we do not know are kept as they are.
nlohmann::ordered_json mergeResults(const nlohmann::ordered_json& prev, const nlohmann::ordered_json& ours,
                                    std::string_view cni_version);

}  // namespace dpu::cni
