// Reading and validating host-shim's configuration: every rule that a running
// daemon relies on (pools inside the VF range, the management VF reserved, CIDRs
// that parse) is checked here, before anything is touched.
#include "host-shim/config.h"

#include <grp.h>

#include <charconv>
#include <vector>

#include "common/atomic_file.h"
#include "common/config_doc.h"
#include "common/net_address.h"

namespace dpu::hostshim {

const PfConfig* Config::pfByIndex(uint32_t index) const {
  for (const auto& pf : pfs)
    if (pf.index == index) return &pf;
  return nullptr;
}

namespace {

Result<uint32_t> parseNumber(std::string_view s, uint32_t max) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    return Error{"'" + std::string(s) + "' is not a VF number"};
  if (v > max) return Error{"VF " + std::to_string(v) + " is above " + std::to_string(max)};
  return v;
}

}  // namespace

Result<std::set<uint32_t>> parseVfRanges(std::string_view text, uint32_t max) {
  std::set<uint32_t> out;
  if (text.find_first_not_of(' ') == std::string_view::npos) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      auto v = parseNumber(part, max);
      if (!v) return Error{v.error() + " (expected ranges like \"0-6,9\")"};
      out.insert(*v);
    } else {
      auto lo = parseNumber(part.substr(0, dash), max);
      auto hi = parseNumber(part.substr(dash + 1), max);
      if (!lo) return Error{lo.error() + " (expected ranges like \"0-6,9\")"};
      if (!hi) return Error{hi.error() + " (expected ranges like \"0-6,9\")"};
      if (*lo > *hi) return Error{"range '" + std::string(part) + "' is reversed"};
      for (uint32_t v = *lo; v <= *hi; ++v) out.insert(v);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// Whether the URL's host is this host itself (localhost, 127.0.0.0/8, [::1]):
// then nothing crosses the host-DPU link (a test, or an agent on the host).
bool urlHostIsLoopback(const std::string& url) {
  auto begin = url.find("://");
  if (begin == std::string::npos) return false;
  std::string host = url.substr(begin + 3);
  host = host.substr(0, host.find('/'));
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? std::string::npos : host.find(']') - 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  if (host == "localhost") return true;
  auto ip = IpAddress::parse(host);
  return ip && ip->isLoopback();
}

void readCidrs(FieldReader& r, std::string_view key, std::vector<std::string>& out) {
  out = r.strings(key);
  for (size_t i = 0; i < out.size(); ++i) {
    auto p = IpPrefix::parse(out[i]);
    if (!p) {
      r.fail(std::string(key) + "[" + std::to_string(i) + "]", p.error() + " (expected a CIDR like 10.96.0.0/12)");
      return;
    }
  }
}

}  // namespace

namespace {

Result<Config> configFromDocument(const nlohmann::json& doc) {
  Config c;
  FieldReader r(doc, "");
  c.socket_path = r.str("socket", c.socket_path);
  c.state_dir = r.str("stateDir", c.state_dir);
  c.sysfs_root = r.str("sysfsRoot", c.sysfs_root);
  c.request_timeout_ms = static_cast<uint32_t>(r.uint("requestTimeoutMs", 100, 600000, c.request_timeout_ms));
  if (r.ok() && (c.socket_path.empty() || c.socket_path.size() > 107))
    r.fail("socket", "must be a unix socket path of 1 to 107 characters");
  if (r.has("socketMode")) {
    std::string mode = r.str("socketMode");
    uint32_t m = 0;
    auto [p, ec] = std::from_chars(mode.data(), mode.data() + mode.size(), m, 8);
    if (r.ok() && (mode.empty() || ec != std::errc() || p != mode.data() + mode.size() || m > 0777))
      r.fail("socketMode", "must be an octal file mode like \"0660\", not '" + mode + "'");
    else if (r.ok() && (m & 0600) != 0600)
      r.fail("socketMode", "must let its owner (root) read and write: \"06xx\", not '" + mode + "'");
    c.socket_mode = m;
  }
  if (const auto* g = r.raw("socketGroup")) {
    if (g->is_number_unsigned() && g->get<uint64_t>() <= 4294967294u) {
      c.socket_group = g->get<uint32_t>();
    } else if (g->is_string() && !g->get<std::string>().empty()) {
      // Resolved now, so a group missing on this host stops the start here
      // rather than at the first chown.
      const std::string name = g->get<std::string>();
      struct group grp {};
      struct group* found = nullptr;
      std::vector<char> buf(16384);
      if (::getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(), &found) == 0 && found)
        c.socket_group = found->gr_gid;
      else
        r.fail("socketGroup", "no group named '" + name + "' on this host; create it or give a gid");
    } else {
      r.fail("socketGroup", "must be a group name or a gid (a number)");
    }
  }
  if (const auto* uids = r.raw("socketAllowedUids")) {
    if (!uids->is_array()) r.fail("socketAllowedUids", "must be a list of user ids");
    for (size_t i = 0; r.ok() && uids->is_array() && i < uids->size(); ++i) {
      const auto& u = (*uids)[i];
      if (!u.is_number_unsigned() || u.get<uint64_t>() > 4294967294u)
        r.fail("socketAllowedUids", "entry " + std::to_string(i) + " must be a user id (a number)");
      else
        c.socket_allowed_uids.insert(u.get<uint32_t>());
    }
  }
  c.max_connections = static_cast<uint32_t>(r.uint("maxConnections", 1, 4096, c.max_connections));
  if (r.ok() && c.state_dir.empty()) r.fail("stateDir", "must not be empty");

  auto pfs = r.objects("pfs", true);
  if (r.ok() && pfs.empty()) r.fail("pfs", "must list at least one PF");
  std::set<uint32_t> indexes;
  std::set<std::string> names;
  for (size_t i = 0; i < pfs.size() && r.ok(); ++i) {
    auto& p = pfs[i];
    PfConfig pf;
    pf.name = p.str("name");
    pf.index = static_cast<uint32_t>(p.uint("index", 0, 255, i));
    std::string pool = p.str("vfs");
    std::string reserved = p.str("reservedVfs", "");
    if (!r.ok()) break;
    if (pf.name.empty() || pf.name.size() > 15 || pf.name.find('/') != std::string::npos) {
      p.fail("name", "must be a netdev name of 1 to 15 characters");
      break;
    }
    auto pv = parseVfRanges(pool);
    if (!pv) {
      p.fail("vfs", pv.error());
      break;
    }
    auto rv = parseVfRanges(reserved);
    if (!rv) {
      p.fail("reservedVfs", rv.error());
      break;
    }
    if (pv->empty()) {
      p.fail("vfs", "must name at least one VF, e.g. \"0-7\"");
      break;
    }
    pf.reserved = *rv;
    for (uint32_t v : *pv)
      if (!pf.reserved.count(v)) pf.pool.insert(v);
    if (!indexes.insert(pf.index).second) {
      p.fail("index", "is used by another PF");
      break;
    }
    if (!names.insert(pf.name).second) {
      p.fail("name", "is used by another PF");
      break;
    }
    if (auto done = p.finish(); !done) return std::move(done).takeError();
    c.pfs.push_back(std::move(pf));
  }

  auto dpu = r.object("dpu");
  c.dpu.url = dpu.str("url");
  c.dpu.ca_file = dpu.str("caFile", "");
  c.dpu.cert_file = dpu.str("certFile", "");
  c.dpu.key_file = dpu.str("keyFile", "");
  c.dpu.insecure = dpu.boolean("insecure", false);
  c.dpu.request_timeout_ms = static_cast<uint32_t>(dpu.uint("timeoutMs", 50, 60000, c.dpu.request_timeout_ms));
  c.dpu.health_interval_ms = static_cast<uint32_t>(dpu.uint("healthIntervalMs", 50, 60000, c.dpu.health_interval_ms));
  c.dpu.reconcile_interval_ms =
      static_cast<uint32_t>(dpu.uint("reconcileIntervalMs", 100, 3600000, c.dpu.reconcile_interval_ms));
  if (r.ok()) {
    bool https = c.dpu.url.rfind("https://", 0) == 0;
    if (!https && c.dpu.url.rfind("http://", 0) != 0)
      dpu.fail("url", "must start with http:// or https://, not '" + c.dpu.url + "'");
    else if (c.dpu.cert_file.empty() != c.dpu.key_file.empty())
      dpu.fail(c.dpu.cert_file.empty() ? "certFile" : "keyFile", "certFile and keyFile go together (mTLS)");
    else if (!https && (!c.dpu.ca_file.empty() || !c.dpu.cert_file.empty()))
      dpu.fail("url", "TLS files are set but the URL is http://; use https://");
    else if (!c.dpu.insecure && !urlHostIsLoopback(c.dpu.url) && !https)
      dpu.fail("url", "'" + c.dpu.url + "' is plain HTTP across the host-DPU link: use https:// with caFile, "
                      "certFile and keyFile (scripts/make-tls.sh makes them), or set insecure: true to allow it");
    else if (!c.dpu.insecure && !urlHostIsLoopback(c.dpu.url) && c.dpu.cert_file.empty())
      dpu.fail("certFile", "the agent takes only a client certificate that names this node: give certFile and "
                           "keyFile, or set insecure: true to go without");
    for (auto [key, file] :
         {std::pair{"caFile", c.dpu.ca_file}, {"certFile", c.dpu.cert_file}, {"keyFile", c.dpu.key_file}})
      if (r.ok() && !file.empty() && !fileExists(file)) dpu.fail(key, "file '" + file + "' does not exist");
  }
  if (auto done = dpu.finish(); !done) return std::move(done).takeError();

  if (r.has("managementPort")) {
    auto m = r.object("managementPort");
    c.management.enabled = m.boolean("enabled", true);
    c.management.pf_index = static_cast<uint32_t>(m.uint("pf", 0, 255, 0));
    c.management.vf_index = static_cast<uint32_t>(m.uint("vf", 0, 4095));
    c.management.ifname = m.str("ifname", "");
    readCidrs(m, "clusterCidrs", c.management.cluster_cidrs);
    readCidrs(m, "serviceCidrs", c.management.service_cidrs);
    if (r.ok() && c.management.ifname.size() > 15) m.fail("ifname", "must be at most 15 characters");
    if (r.ok() && c.management.enabled) {
      const PfConfig* pf = c.pfByIndex(c.management.pf_index);
      if (!pf)
        m.fail("pf", "no PF with index " + std::to_string(c.management.pf_index) + " in pfs");
      else if (!pf->reserved.count(c.management.vf_index))
        m.fail("vf", "VF " + std::to_string(c.management.vf_index) + " must be listed in pfs[].reservedVfs of PF " +
                         pf->name + " so it is never handed to a pod");
    }
    if (auto done = m.finish(); !done) return std::move(done).takeError();
  }

  auto log = r.object("log", true);
  c.log_file = log.str("file", "");
  c.log_level = log.str("level", "info");
  if (r.ok() && c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" && c.log_level != "error")
    log.fail("level", "must be one of debug, info, warn, error, not '" + c.log_level + "'");
  if (auto done = log.finish(); !done) return std::move(done).takeError();

  if (auto done = r.finish(); !done) return std::move(done).takeError();
  return c;
}

}  // namespace

Result<Config> parseConfig(std::string_view text, std::string_view origin) {
  auto doc = parseConfigText(text, origin);
  if (!doc) return std::move(doc).takeError();
  return configFromDocument(*doc);
}

// The file as the other daemons read theirs (loadConfigFile): ${NAME} in a value
// is the environment variable NAME, so one ConfigMap serves every host and each
// names its own certificate (certFile: /etc/dpu-cni/tls/${NODE_NAME}.crt).
Result<Config> loadConfig(const std::string& path) {
  auto doc = loadConfigFile(path);
  if (!doc) return std::move(doc).takeError();
  auto c = configFromDocument(*doc);
  if (!c) return prefixed(path, std::move(c).takeError());
  return c;
}

}  // namespace dpu::hostshim
