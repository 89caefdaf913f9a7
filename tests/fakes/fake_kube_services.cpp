// Service cluster IPs as kube-apiserver handles them; see fake_kube_services.h.
// The steps follow the real server's order (its service storage's create and
// update, then ValidateService and ValidateServiceUpdate), so that of several
// problems a request has, the fake reports the ones the real server would.
#include "fake_kube_services.h"

#include <optional>

namespace dpu::fakes {
namespace {

using nlohmann::json;

const char* familyOf(const IpAddress& a) { return a.isV4() ? "IPv4" : "IPv6"; }

// The cluster IP fields of a Service spec, as the real server's typed object holds them.
struct IpFields {
  std::string type;
  std::string cluster_ip;
  std::vector<std::string> cluster_ips;
  std::vector<std::string> families;
  std::optional<std::string> policy;
  bool selectorless = true;

  bool headless() const { return cluster_ips.size() == 1 && cluster_ips[0] == "None"; }
  bool external() const { return type == "ExternalName"; }
  std::string policyOr(const std::string& none) const { return policy.value_or(none); }
};

std::vector<std::string> specStrings(const json& spec, const char* key) {
  std::vector<std::string> out;
  if (spec.contains(key) && spec[key].is_array())
    for (const auto& v : spec[key]) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

IpFields readFields(const json& spec) {
  IpFields f;
  f.type = spec.value("type", "ClusterIP");
  if (spec.contains("clusterIP") && spec["clusterIP"].is_string()) f.cluster_ip = spec["clusterIP"];
  f.cluster_ips = specStrings(spec, "clusterIPs");
  f.families = specStrings(spec, "ipFamilies");
  if (spec.contains("ipFamilyPolicy") && spec["ipFamilyPolicy"].is_string()) f.policy = spec["ipFamilyPolicy"];
  f.selectorless = !spec.contains("selector") || !spec["selector"].is_object() || spec["selector"].empty();
  return f;
}

void writeFields(const IpFields& f, json& spec) {
  if (f.cluster_ip.empty()) spec.erase("clusterIP");
  else spec["clusterIP"] = f.cluster_ip;
  if (f.cluster_ips.empty()) spec.erase("clusterIPs");
  else spec["clusterIPs"] = f.cluster_ips;
  if (f.families.empty()) spec.erase("ipFamilies");
  else spec["ipFamilies"] = f.families;
  if (f.policy) spec["ipFamilyPolicy"] = *f.policy;
  else spec.erase("ipFamilyPolicy");
}

// A value in a message, as the real server prints it.
std::string valueText(const std::string& s) { return json(s).dump(); }
std::string list(const std::vector<std::string>& v) { return json(v).dump(); }

class Checker {
 public:
  explicit Checker(ServiceIpProblems& out) : out_(out) {}
  void invalid(const std::string& field, const std::string& value, const std::string& why) {
    out_.causes.emplace_back(field, "Invalid value: " + value + ": " + why);
  }
  void cause(const std::string& field, const std::string& message) { out_.causes.emplace_back(field, message); }
  bool failed() const { return !out_.empty(); }

 private:
  ServiceIpProblems& out_;
};

// ValidateServiceClusterIPsRelatedFields: clusterIP against clusterIPs, the
// values each of the three fields may take, and clusterIPs against ipFamilies.
void validateRelatedFields(const IpFields& f, Checker& c) {
  if (f.external()) return;
  if (!f.cluster_ip.empty()) {
    if (f.cluster_ips.empty()) c.cause("spec.clusterIPs", "Required value");
    else if (f.cluster_ips[0] != f.cluster_ip)
      c.invalid("spec.clusterIPs", list(f.cluster_ips), "first value must match `clusterIP`");
  } else if (!f.cluster_ips.empty()) {
    c.invalid("spec.clusterIPs", list(f.cluster_ips), "must be empty when `clusterIP` is not specified");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < f.families.size(); ++i) {
    std::string field = "spec.ipFamilies[" + std::to_string(i) + "]";
    if (f.families[i] != "IPv4" && f.families[i] != "IPv6")
      c.cause(field, "Unsupported value: " + valueText(f.families[i]) + ": supported values: \"IPv4\", \"IPv6\"");
    if (!seen.insert(f.families[i]).second) c.cause(field, "Duplicate value: " + valueText(f.families[i]));
  }
  if (f.policy && *f.policy != "SingleStack" && *f.policy != "PreferDualStack" && *f.policy != "RequireDualStack")
    c.cause("spec.ipFamilyPolicy",
            "Unsupported value: " + valueText(*f.policy) +
                ": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"");
  bool bad_ips = false;
  std::vector<IpAddress> ips;
  for (size_t i = 0; i < f.cluster_ips.size(); ++i) {
    if (i == 0 && f.cluster_ips[0] == "None") {
      if (f.cluster_ips.size() > 1) {
        bad_ips = true;
        c.invalid("spec.clusterIPs", list(f.cluster_ips), "'None' must be the first and only value");
      }
      continue;
    }
    auto ip = IpAddress::parse(f.cluster_ips[i]);
    if (!ip) {
      bad_ips = true;
      c.invalid("spec.clusterIPs[" + std::to_string(i) + "]", valueText(f.cluster_ips[i]),
                "must be a valid IP address");
    } else {
      ips.push_back(*ip);
    }
  }
  if (f.cluster_ips.size() > 2) c.invalid("spec.clusterIPs", list(f.cluster_ips), "may only hold up to 2 values");
  // An invalid address would make the checks below report nonsense.
  if (bad_ips) return;
  if (ips.size() == 2 && ips[0].isV4() == ips[1].isV4())
    c.invalid("spec.clusterIPs", list(f.cluster_ips), "may specify no more than one IP for each IP family");
  if (!f.headless())
    for (size_t i = 0; i < ips.size() && i < f.families.size(); ++i)
      if ((f.families[i] == "IPv4" && !ips[i].isV4()) || (f.families[i] == "IPv6" && ips[i].isV4()))
        c.invalid("spec.clusterIPs[" + std::to_string(i) + "]", valueText(f.cluster_ips[i]),
                  "expected an " + f.families[i] + " value as indicated by `ipFamilies[" + std::to_string(i) + "]`");
}

// normalizeClusterIPs: clusterIP and clusterIPs kept in step for a client
// that writes only the singular field (kubectl's generators, old clients).
void normalize(IpFields& f, const IpFields* old) {
  if (old == nullptr) {
    if (!f.cluster_ip.empty() && f.cluster_ips.empty()) f.cluster_ips = {f.cluster_ip};
    return;
  }
  if (!old->cluster_ips.empty() && f.cluster_ips.empty() && old->cluster_ip == f.cluster_ip)
    f.cluster_ips = old->cluster_ips;
  if (old->cluster_ip != f.cluster_ip && f.cluster_ips == old->cluster_ips) {
    if (!old->cluster_ip.empty() && f.cluster_ip.empty()) f.cluster_ips.clear();
    else f.cluster_ips = {f.cluster_ip};
  }
}

// A PreferDualStack Service left as it was is not upgraded or downgraded
// when the cluster's dual-stackness changed since.
bool unchangedPreferDualStack(const IpFields& f, const IpFields* old) {
  return old != nullptr && f.type == old->type && f.policy == std::optional<std::string>("PreferDualStack") &&
         old->policy == f.policy && f.cluster_ips == old->cluster_ips && f.families == old->families;
}

// initIPFamilyFields: ipFamilyPolicy and ipFamilies defaulted from what was
// given and what the server has ranges for. Returns false when refused.
bool initFamilies(IpFields& f, const IpFields* old, const ServiceCidrs& cidrs, Checker& c) {
  if (!f.policy) {
    if (old != nullptr && old->policy) f.policy = old->policy;
    else if (f.cluster_ip == "None" && f.selectorless) f.policy = "RequireDualStack";
    else f.policy = "SingleStack";
  }
  validateRelatedFields(f, c);
  if (c.failed()) return false;
  if (old != nullptr) {
    if (*f.policy == "SingleStack") {
      // SingleStack with the secondary left as it was: release it.
      if (f.cluster_ips == old->cluster_ips && f.cluster_ips.size() > 1) f.cluster_ips.resize(1);
      if (f.families == old->families && f.families.size() > 1) f.families.resize(1);
    } else {
      if (!f.cluster_ips.empty() && f.cluster_ips.size() < old->cluster_ips.size())
        c.invalid("spec.ipFamilyPolicy", valueText(*f.policy),
                  "must be 'SingleStack' to release the secondary cluster IP");
      if (!f.families.empty() && f.families.size() < old->families.size())
        c.invalid("spec.ipFamilyPolicy", valueText(*f.policy),
                  "must be 'SingleStack' to release the secondary IP family");
    }
  }
  if (*f.policy == "SingleStack") {
    if (f.cluster_ips.size() == 2)
      c.invalid("spec.ipFamilyPolicy", valueText(*f.policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified");
    if (f.families.size() == 2)
      c.invalid("spec.ipFamilyPolicy", valueText(*f.policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified");
  }
  // ipFamilies from the given clusterIPs, where not given.
  for (size_t i = 0; i < f.cluster_ips.size(); ++i) {
    if (f.cluster_ips[i] == "None") break;
    auto ip = IpAddress::parse(f.cluster_ips[i]);
    if (!ip) break;  // validated above
    if (i < f.families.size()) continue;
    std::string family = familyOf(*ip);
    if (cidrs.range(family) == nullptr)
      c.invalid("spec.clusterIPs[" + std::to_string(i) + "]", list(f.cluster_ips),
                family + " is not configured on this cluster");
    else
      f.families.push_back(family);
  }
  if (c.failed()) return false;
  auto other = [](const std::string& family) { return family == "IPv4" ? "IPv6" : "IPv4"; };
  // Headless without a selector may have any families (the server allocates nothing).
  if (f.cluster_ip == "None" && f.selectorless) {
    if (f.families.empty()) f.families = {cidrs.primaryFamily()};
    if (f.families.size() < 2 && *f.policy != "SingleStack") f.families.push_back(other(f.families[0]));
    return true;
  }
  if (*f.policy == "RequireDualStack" && !cidrs.dualStack())
    c.invalid("spec.ipFamilyPolicy", valueText(*f.policy), "this cluster is not configured for dual-stack services");
  for (size_t i = 0; i < f.families.size(); ++i)
    if (cidrs.range(f.families[i]) == nullptr)
      c.invalid("spec.ipFamilies[" + std::to_string(i) + "]", valueText(f.families[i]),
                "not configured on this cluster");
  if (c.failed()) return false;
  if (f.families.empty()) f.families = {cidrs.primaryFamily()};
  if (*f.policy != "SingleStack" && f.families.size() == 1 && cidrs.dualStack())
    f.families.push_back(other(f.families[0]));
  return true;
}

// The ipallocator: a given address must be in its family's range (not the
// network address, nor IPv4's broadcast) and free; none given: the first free.
bool allocate(IpFields& f, size_t i, const ServiceCidrs& cidrs, const std::set<IpAddress>& taken,
              ServiceIpProblems& out) {
  const IpPrefix& range = *cidrs.range(f.families[i]);
  uint64_t size = range.size();
  uint64_t last = range.address.isV4() ? size - 2 : size - 1;  // usable offsets 1..last
  if (f.cluster_ips[i].empty()) {
    for (uint64_t n = 1; n <= last; ++n) {
      IpAddress candidate = range.at(n);
      if (taken.count(candidate)) continue;
      f.cluster_ips[i] = candidate.str();
      return true;
    }
    out.internal = "failed to allocate a serviceIP: range is full";
    return false;
  }
  auto ip = IpAddress::parse(f.cluster_ips[i]);
  std::string why;
  if (!ip || !range.contains(*ip) || *ip == range.address || (ip->isV4() && *ip == range.at(size - 1)))
    why = "the provided IP (" + f.cluster_ips[i] + ") is not in the valid range. The range of valid IPs is " +
          range.str();
  else if (taken.count(*ip))
    why = "provided IP is already allocated";
  if (why.empty()) return true;
  out.causes.emplace_back("spec.clusterIPs", "Invalid value: " + list(f.cluster_ips) + ": failed to allocate IP " +
                                                 f.cluster_ips[i] + ": " + why);
  return false;
}

// ValidateServiceUpdate's upgrade and downgrade rules: clusterIPs[0] and
// ipFamilies[0] never change; dropping the secondary needs SingleStack.
void validateUpgradeDowngrade(const IpFields& f, const IpFields& old, Checker& c) {
  if (f.external() || old.external()) return;
  auto check = [&](const std::vector<std::string>& now, const std::vector<std::string>& was, const std::string& name,
                   const std::string& what) {
    std::string field = "spec." + name;
    if (now.size() == was.size()) {
      // (The real server names ipFamilies[0] whichever family changed.)
      for (size_t i = 0; i < was.size(); ++i)
        if (now[i] != was[i])
          c.invalid(field + "[" + std::to_string(name == "ipFamilies" ? 0 : i) + "]", list(now),
                    "may not change once set");
    } else if (now.size() < was.size()) {
      if (now.empty()) c.invalid(field + "[0]", list(now), "primary " + what + " can not be unset");
      else if (now[0] != was[0]) c.invalid(field + "[0]", list(now), "may not change once set");
      if (now.size() == 1 && f.policyOr("") != "SingleStack")
        c.invalid("spec.ipFamilyPolicy", f.policy ? valueText(*f.policy) : "null",
                  "must be set to 'SingleStack' when releasing the secondary " + what);
    } else if (!was.empty() && now[0] != was[0]) {
      c.invalid(field + "[0]", list(now), "may not change once set");
    }
  };
  if (!(old.headless() && f.headless())) check(f.cluster_ips, old.cluster_ips, "clusterIPs", "clusterIP");
  if (old.headless() == f.headless() && !f.headless()) check(f.families, old.families, "ipFamilies", "ipFamily");
}

}  // namespace

Result<ServiceCidrs> ServiceCidrs::parse(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto what = [&] { return "service CIDRs \"" + text + "\": "; };
  if (parts.size() > 2)
    return Error{what() + "one CIDR, or two of different families comma-separated (kube-apiserver's "
                          "--service-cluster-ip-range), not " + std::to_string(parts.size()),
                 ErrorCode::kInvalid};
  ServiceCidrs out;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto p = IpPrefix::parse(parts[i]);
    if (!p) return Error{what() + "[" + std::to_string(i) + "] is not a valid CIDR: " + p.error(), ErrorCode::kInvalid};
    // The real allocator's limit: at most 2^20 addresses.
    unsigned bits = p->address.isV4() ? 32 : 128;
    if (p->length < bits - 20)
      return Error{what() + "[" + std::to_string(i) + "] " + p->str() + " is too large; for " + std::to_string(bits) +
                       "-bit addresses, the mask must be >= " + std::to_string(bits - 20),
                   ErrorCode::kInvalid};
    out.ranges.push_back(*p);
  }
  if (out.ranges.size() == 2 && out.ranges[0].address.isV4() == out.ranges[1].address.isV4())
    return Error{what() + "[0] and [1] must be of different IP families", ErrorCode::kInvalid};
  return out;
}

std::string ServiceCidrs::primaryFamily() const { return familyOf(ranges.at(0).address); }

const IpPrefix* ServiceCidrs::range(const std::string& family) const {
  for (const auto& r : ranges)
    if (familyOf(r.address) == family) return &r;
  return nullptr;
}

IpAddress ServiceCidrs::firstPrimary() const { return ranges.at(0).at(1); }

ServiceIpProblems assignServiceIps(json& spec, const json* old_spec, const ServiceCidrs& cidrs,
                                   const std::set<IpAddress>& taken) {
  ServiceIpProblems out;
  Checker c(out);
  IpFields f = readFields(spec);
  std::optional<IpFields> old;
  if (old_spec != nullptr) old = readFields(*old_spec);
  const IpFields* o = old ? &*old : nullptr;
  if (f.external()) {
    // Turned into ExternalName: the cluster IP fields the client left as they were go.
    if (o != nullptr && !o->external()) {
      if (f.cluster_ip == o->cluster_ip && f.cluster_ips == o->cluster_ips) {
        f.cluster_ip.clear();
        f.cluster_ips.clear();
      }
      if (f.families == o->families) f.families.clear();
      if (f.policy == o->policy) f.policy.reset();
    }
    normalize(f, o);
    if (!f.cluster_ips.empty()) c.cause("spec.clusterIPs", "Forbidden: may not be set for ExternalName services");
    if (!f.families.empty()) c.cause("spec.ipFamilies", "Forbidden: may not be set for ExternalName services");
    if (f.policy) c.cause("spec.ipFamilyPolicy", "Forbidden: may not be set for ExternalName services");
    if (!c.failed()) writeFields(f, spec);
    return out;
  }
  // An update that leaves out what the server allocated keeps it.
  if (o != nullptr && !o->external()) {
    if (f.cluster_ip.empty()) f.cluster_ip = o->cluster_ip;
    if (f.cluster_ips.empty() && !o->cluster_ips.empty()) f.cluster_ips = o->cluster_ips;
  }
  normalize(f, o);
  if (!unchangedPreferDualStack(f, o)) {
    if (!initFamilies(f, o, cidrs, c)) return out;
    bool headless = !f.cluster_ips.empty() && f.cluster_ips[0] == "None";
    if (f.cluster_ip == "None" && f.selectorless) headless = true;
    // Which of the families need an address: all on a create (or a type
    // change from ExternalName), the secondary on an upgrade to dual stack.
    // Counted by the old Service's addresses, which the real server always
    // has one of per family; the fake's control API may have stored a
    // Service without them (without any: as a create).
    size_t from = f.families.size();
    if (o == nullptr || o->external() || o->cluster_ips.empty()) from = 0;
    else if (!o->headless() && o->cluster_ips.size() == 1 && f.families.size() == 2) from = 1;
    if (headless) from = f.families.size();
    for (size_t i = from; i < f.families.size(); ++i) {
      if (f.cluster_ips.size() <= i) f.cluster_ips.resize(i + 1);
      if (!allocate(f, i, cidrs, taken, out)) return out;
    }
    if (!f.cluster_ips.empty()) f.cluster_ip = f.cluster_ips[0];
  }
  // ValidateService and ValidateServiceUpdate on the result.
  validateRelatedFields(f, c);
  if (o != nullptr) validateUpgradeDowngrade(f, *o, c);
  if (!c.failed()) writeFields(f, spec);
  return out;
}

std::vector<std::string> serviceAddressTypes(const json& spec) {
  std::vector<std::string> out;
  for (const auto& f : specStrings(spec, "ipFamilies"))
    if (f == "IPv4" || f == "IPv6") out.push_back(f);
  if (!out.empty()) return out;
  auto ip = IpAddress::parse(spec.value("clusterIP", ""));
  return {ip ? familyOf(*ip) : "IPv4"};
}

}  // namespace dpu::fakes
