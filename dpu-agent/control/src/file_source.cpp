// The cluster-file ClusterSource (see file_source.h).
#include "control/file_source.h"

#include <dirent.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/config_doc.h"
#include "common/log.h"
#include "common/net_address.h"
#include "control/cluster_objects.h"

namespace dpu::control {
namespace {

constexpr const char* kLog = "file-source";

std::string key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::map<std::string, std::string> labelsOf(FieldReader& r) {
  std::map<std::string, std::string> out;
  (void)readLabels(r, out);
  return out;
}

std::vector<std::string> readIps(FieldReader& r, const std::string& field, bool required) {
  auto ips = r.strings(field, required);
  for (auto& ip : ips) {
    auto a = IpAddress::parse(ip);
    if (!a) {
      r.fail(field, a.error());
      return {};
    }
    ip = a->str();
  }
  return ips;
}

std::vector<std::string> readCidrs(FieldReader& r) {
  std::vector<std::string> texts;
  if (r.has("podCIDR")) texts.push_back(r.str("podCIDR"));
  else r.ignore({"podCIDR"});
  for (auto& t : r.strings("podCIDRs")) texts.push_back(t);
  for (auto& t : texts) {
    auto p = IpPrefix::parse(t);
    if (!p) {
      r.fail("podCIDRs", p.error());
      return {};
    }
    t = p->str();
  }
  return texts;
}

// "portKeys": {"10.244.1.5": 3, ...}: pod addresses and their 15-bit logical port keys.
std::map<std::string, uint32_t> readPortKeys(FieldReader& r) {
  std::map<std::string, uint32_t> out;
  const nlohmann::json* v = r.raw("portKeys");
  if (!v) return out;
  if (!v->is_object()) {
    r.fail("portKeys", "must be an object of address: key");
    return out;
  }
  for (const auto& [k, val] : v->items()) {
    auto ip = IpAddress::parse(k);
    if (!ip) {
      r.fail("portKeys", "'" + k + "': " + ip.error());
      return {};
    }
    if (!val.is_number_unsigned() || val.get<uint64_t>() < 1 || val.get<uint64_t>() > 32767) {
      r.fail("portKeys", "the key of " + k + " must be a number 1..32767 (15-bit OVN port key)");
      return {};
    }
    out[ip->str()] = static_cast<uint32_t>(val.get<uint64_t>());
  }
  return out;
}

NodeInfo readNode(FieldReader& n) {
  NodeInfo node;
  node.name = n.str("name");
  if (n.ok() && node.name.empty()) n.fail("name", "must not be empty");
  node.tunnel_ip = n.str("tunnelIP", "");
  if (n.ok() && !node.tunnel_ip.empty()) {
    auto a = IpAddress::parse(node.tunnel_ip);
    if (!a) n.fail("tunnelIP", a.error());
    else node.tunnel_ip = a->str();
  }
  node.pod_cidrs = readCidrs(n);
  node.ipsec_public_key = n.str("ipsecPublicKey", "");
  node.ipsec_epoch = static_cast<uint32_t>(n.uint("ipsecEpoch", 0, 0xffffffffu, 0));
  node.ipsec_mode = n.str("ipsecMode", "");
  node.ipsec_nat_address = n.str("ipsecNatAddress", "");
  if (n.ok() && !node.ipsec_nat_address.empty()) {
    auto a = IpAddress::parse(node.ipsec_nat_address);
    if (!a) n.fail("ipsecNatAddress", a.error());
    else node.ipsec_nat_address = a->str();
  }
  node.labels = labelsOf(n);
  node.port_keys = readPortKeys(n);
  return node;
}

}  // namespace

Result<ClusterSnapshot> parseClusterFile(const std::string& text, const std::string& origin) {
  auto doc = parseConfigText(text, origin);
  if (!doc) return std::move(doc).takeError();
  if (doc->is_null()) doc = nlohmann::json::object();  // an empty file: an empty cluster
  ClusterSnapshot snap;
  FieldReader r(*doc, origin);
  for (auto& n : r.objects("nodes")) {
    NodeInfo node = readNode(n);
    if (auto done = n.finish(); !done) return std::move(done).takeError();
    if (snap.nodes.count(node.name)) return Error{origin + ": node " + node.name + " is listed twice"};
    snap.nodes[node.name] = std::move(node);
  }
  // Namespaces: listed ones with their labels; every other one an object
  // names exists too (as in Kubernetes, where it must), with only its name label.
  for (auto& n : r.objects("namespaces")) {
    NamespaceInfo ns;
    ns.name = n.str("name");
    if (n.ok() && ns.name.empty()) n.fail("name", "must not be empty");
    ns.labels = labelsOf(n);
    ns.labels[kNamespaceNameLabel] = ns.name;
    if (auto done = n.finish(); !done) return std::move(done).takeError();
    if (!snap.namespaces.emplace(ns.name, ns).second) return Error{origin + ": namespace " + ns.name + " is listed twice"};
  }
  for (auto& p : r.objects("pods")) {
    PodInfo pod;
    pod.ns = p.str("namespace", "default");
    pod.name = p.str("name");
    pod.uid = p.str("uid", "");
    pod.node_name = p.str("nodeName", "");
    pod.ips = readIps(p, "ips", false);
    pod.labels = labelsOf(p);
    pod.host_network = p.boolean("hostNetwork", false);
    (void)readContainerPorts(p, pod.ports, true);
    if (auto done = p.finish(); !done) return std::move(done).takeError();
    if (!snap.pods.emplace(key(pod.ns, pod.name), pod).second) return Error{origin + ": pod " + key(pod.ns, pod.name) + " is listed twice"};
  }
  for (auto& s : r.objects("services")) {
    ServiceInfo svc;
    svc.ns = s.str("namespace", "default");
    svc.name = s.str("name");
    svc.labels = labelsOf(s);
    // The entry holds the spec's fields and the status's loadBalancer.
    (void)readServiceSpec(s, svc, true);
    (void)readServiceStatus(s, svc, true);
    if (auto done = s.finish(); !done) return std::move(done).takeError();
    if (!snap.services.emplace(key(svc.ns, svc.name), svc).second) {
      return Error{origin + ": service " + key(svc.ns, svc.name) + " is listed twice"};
    }
  }
  for (auto& e : r.objects("endpointSlices")) {
    EndpointSliceInfo slice;
    slice.ns = e.str("namespace", "default");
    slice.name = e.str("name");
    // The Service: "service", or the label the EndpointSlice controller sets.
    auto labels = labelsOf(e);
    slice.service_name = e.str("service", labels.count(kServiceNameLabel) ? labels[kServiceNameLabel] : "");
    if (e.ok() && slice.service_name.empty())
      e.fail("service", std::string("is required (or the label ") + kServiceNameLabel + ")");
    (void)readEndpointSlice(e, slice, true);
    if (auto done = e.finish(); !done) return std::move(done).takeError();
    if (!snap.slices.emplace(key(slice.ns, slice.name), slice).second) {
      return Error{origin + ": endpoint slice " + key(slice.ns, slice.name) + " is listed twice"};
    }
  }
  for (auto& n : r.objects("networkPolicies")) {
    NetworkPolicyInfo policy;
    policy.ns = n.str("namespace", "default");
    policy.name = n.str("name");
    (void)readNetworkPolicySpec(n, policy, true);
    if (auto done = n.finish(); !done) return std::move(done).takeError();
    if (!snap.policies.emplace(key(policy.ns, policy.name), policy).second) {
      return Error{origin + ": network policy " + key(policy.ns, policy.name) + " is listed twice"};
    }
  }
  auto implied = [&](const std::string& ns) {
    if (snap.namespaces.count(ns)) return;
    snap.namespaces[ns] = NamespaceInfo{ns, {{kNamespaceNameLabel, ns}}};
  };
  for (const auto& [k, v] : snap.pods) implied(v.ns);
  for (const auto& [k, v] : snap.services) implied(v.ns);
  for (const auto& [k, v] : snap.slices) implied(v.ns);
  for (const auto& [k, v] : snap.policies) implied(v.ns);
  if (auto done = r.finish(); !done) return std::move(done).takeError();
  return snap;
}

Result<NodeInfo> parsePublishFile(const std::string& text, const std::string& origin) {
  auto doc = parseConfigText(text, origin);
  if (!doc) return std::move(doc).takeError();
  FieldReader r(*doc, origin);
  NodeInfo node = readNode(r);
  if (auto done = r.finish(); !done) return std::move(done).takeError();
  return node;
}

void mergePublished(ClusterSnapshot& snap, const std::vector<NodeInfo>& published) {
  for (const auto& p : published) {
    auto [it, added] = snap.nodes.try_emplace(p.name, p);
    if (added) continue;
    NodeInfo& n = it->second;
    if (!p.tunnel_ip.empty()) n.tunnel_ip = p.tunnel_ip;
    if (!p.ipsec_public_key.empty()) {
      n.ipsec_public_key = p.ipsec_public_key;
      n.ipsec_epoch = p.ipsec_epoch;
      n.ipsec_mode = p.ipsec_mode;
    }
    if (n.pod_cidrs.empty()) n.pod_cidrs = p.pod_cidrs;
    // The node's own agent knows whether a NAT is in front of it.
    if (!p.ipsec_nat_address.empty()) n.ipsec_nat_address = p.ipsec_nat_address;
    // The node's own agent knows its ports: its publish file has the keys.
    n.port_keys = p.port_keys;
    for (const auto& [k, v] : p.labels) n.labels.try_emplace(k, v);
  }
}

namespace {

template <typename Map, typename Upsert, typename Delete>
size_t diffMaps(const Map& before, const Map& after, Upsert upsert, Delete del) {
  size_t n = 0;
  for (const auto& [k, v] : before) {
    if (!after.count(k)) {
      del(v);
      ++n;
    }
  }
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    if (it == before.end() || !(it->second == v)) {
      upsert(v);
      ++n;
    }
  }
  return n;
}

}  // namespace

size_t deliverDifferences(const ClusterSnapshot& before, const ClusterSnapshot& after, ClusterListener& l,
                          std::array<uint64_t, kObjectKindCount>* by_kind) {
  size_t n = 0;
  auto count = [&](ObjectKind k, size_t changes) {
    if (by_kind) (*by_kind)[static_cast<size_t>(k)] += changes;
    n += changes;
  };
  count(ObjectKind::kNode, diffMaps(before.nodes, after.nodes, [&](const NodeInfo& v) { l.nodeUpserted(v); },
                                    [&](const NodeInfo& v) { l.nodeDeleted(v.name); }));
  count(ObjectKind::kNamespace,
        diffMaps(before.namespaces, after.namespaces, [&](const NamespaceInfo& v) { l.namespaceUpserted(v); },
                 [&](const NamespaceInfo& v) { l.namespaceDeleted(v.name); }));
  count(ObjectKind::kPod, diffMaps(before.pods, after.pods, [&](const PodInfo& v) { l.podUpserted(v); },
                                   [&](const PodInfo& v) { l.podDeleted(v.ns, v.name); }));
  count(ObjectKind::kService,
        diffMaps(before.services, after.services, [&](const ServiceInfo& v) { l.serviceUpserted(v); },
                 [&](const ServiceInfo& v) { l.serviceDeleted(v.ns, v.name); }));
  count(ObjectKind::kEndpointSlice,
        diffMaps(before.slices, after.slices, [&](const EndpointSliceInfo& v) { l.endpointSliceUpserted(v); },
                 [&](const EndpointSliceInfo& v) { l.endpointSliceDeleted(v.ns, v.name); }));
  count(ObjectKind::kNetworkPolicy,
        diffMaps(before.policies, after.policies, [&](const NetworkPolicyInfo& v) { l.networkPolicyUpserted(v); },
                 [&](const NetworkPolicyInfo& v) { l.networkPolicyDeleted(v.ns, v.name); }));
  return n;
}

FileClusterSource::FileClusterSource(std::string path, std::chrono::milliseconds poll, std::chrono::milliseconds settle)
    : path_(std::move(path)), poll_(poll), settle_(settle) {}

FileClusterSource::~FileClusterSource() { stop(); }

std::map<std::string, FileClusterSource::FileId> FileClusterSource::identities() const {
  std::map<std::string, FileId> out;
  auto add = [&](const std::string& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return;
    out[p] = FileId{static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  };
  add(path_);
  if (DIR* d = ::opendir(publishDir().c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      // Only finished publish files: temporaries of atomic writes do not end in .json.
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0 && name[0] != '.') {
        add(publishDir() + "/" + name);
      }
    }
    ::closedir(d);
  }
  return out;
}

void FileClusterSource::reload(const std::map<std::string, FileId>& ids) {
  std::string problem;
  auto text = readFile(path_);
  Result<ClusterSnapshot> parsed = text ? parseClusterFile(*text, path_) : Result<ClusterSnapshot>(std::move(text).takeError());
  if (!parsed) {
    std::lock_guard lock(stats_mu_);
    stats_.last_error = parsed.error() + " (keeping the last good state)";
    ++stats_.malformed;
    DPU_LOG(kError, kLog) << stats_.last_error;
    return;
  }
  std::vector<NodeInfo> published;
  std::map<std::string, NodeInfo> good;
  for (const auto& [file, id] : ids) {
    if (file == path_) continue;
    auto t = readFile(file);
    Result<NodeInfo> node = t ? parsePublishFile(*t, file) : Result<NodeInfo>(std::move(t).takeError());
    if (!node) {
      problem = node.error();
      auto last = last_good_published_.find(file);
      std::lock_guard lock(stats_mu_);
      ++stats_.malformed;
      stats_.last_error = problem + (last != last_good_published_.end() ? " (keeping its last good entry)" : " (ignored)");
      DPU_LOG(kError, kLog) << stats_.last_error;
      if (last != last_good_published_.end()) {
        good[file] = last->second;
        published.push_back(last->second);
      }
      continue;
    }
    good[file] = *node;
    published.push_back(*node);
  }
  last_good_published_ = std::move(good);
  ClusterSnapshot next = std::move(*parsed);
  mergePublished(next, published);
  std::array<uint64_t, kObjectKindCount> by_kind{};
  size_t changes = deliverDifferences(current_, next, *listener_, &by_kind);
  current_ = std::move(next);
  listener_->synced();
  {
    std::lock_guard lock(stats_mu_);
    stats_.events += changes;
    for (size_t i = 0; i < kObjectKindCount; ++i) stats_.events_by_kind[i] += by_kind[i];
    if (delivered_once_) ++stats_.relists;
    stats_.synced = true;
    if (problem.empty()) stats_.last_error.clear();
  }
  if (!delivered_once_ || changes) {
    DPU_LOG(kInfo, kLog) << "loaded " << path_ << ": " << current_.nodes.size() << " nodes, " << current_.services.size()
                         << " services, " << changes << " changes";
  }
  delivered_once_ = true;
}

bool FileClusterSource::unsettled(const std::map<std::string, FileId>& ids) {
  if (!delivered_once_ || settle_.count() <= 0) return false;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t settle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(settle_).count();
  bool fresh = false;
  for (const auto& [file, id] : ids) {
    auto before = seen_.find(file);
    // A new file or a new inode was renamed into place whole.
    if (before == seen_.end() || before->second.inode != id.inode || before->second == id) continue;
    if (now_ns - id.mtime_ns < settle_ns) fresh = true;
  }
  auto now = std::chrono::steady_clock::now();
  if (!fresh) {
    unsettled_ids_.clear();
    return false;
  }
  if (ids != unsettled_ids_) {
    if (unsettled_ids_.empty()) {
      DPU_LOG(kDebug, kLog) << path_ << " or a publish file is being written in place: reading it once it has been still for "
                            << settle_.count() << " ms";
    }
    unsettled_ids_ = ids;
    unsettled_since_ = now;
    return true;
  }
  // An mtime in the future (a clock step, a remote file system): still for settle_ is enough.
  if (now - unsettled_since_ < settle_) return true;
  unsettled_ids_.clear();
  return false;
}

void FileClusterSource::pollOnce() {
  std::lock_guard lock(poll_mu_);
  if (!listener_) return;
  auto ids = identities();
  if (ids == seen_ && delivered_once_) return;
  if (unsettled(ids)) return;
  seen_ = ids;
  if (!ids.count(path_)) {
    std::lock_guard slock(stats_mu_);
    if (stats_.last_error.find("missing") == std::string::npos) {
      stats_.last_error = "cluster file " + path_ + " is missing (keeping the last good state)";
      DPU_LOG(kError, kLog) << stats_.last_error;
    }
    return;
  }
  reload(ids);
}

Result<void> FileClusterSource::start(ClusterListener& listener) {
  if (!fileExists(path_)) return Error{"cluster file " + path_ + " does not exist: create it (an empty file is an empty cluster)"};
  if (running_.exchange(true)) return Error{"the file cluster source is already started"};
  {
    std::lock_guard lock(poll_mu_);
    listener_ = &listener;
  }
  thread_ = std::thread([this] {
    while (running_.load()) {
      pollOnce();
      for (auto slept = std::chrono::milliseconds(0); slept < poll_ && running_.load(); slept += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_for(std::min(std::chrono::milliseconds(20), poll_));
      }
    }
  });
  return {};
}

void FileClusterSource::stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
}

Result<void> FileClusterSource::publishSelf(const SelfEntry& self) {
  if (self.node_name.empty() || self.node_name.find('/') != std::string::npos || self.node_name[0] == '.') {
    return Error{"cannot publish node name '" + self.node_name + "': not a valid file name"};
  }
  nlohmann::json j;
  j["name"] = self.node_name;
  if (!self.tunnel_ip.empty()) j["tunnelIP"] = self.tunnel_ip;
  if (!self.ipsec_public_key.empty()) {
    j["ipsecPublicKey"] = self.ipsec_public_key;
    j["ipsecEpoch"] = self.ipsec_epoch;
    if (!self.ipsec_mode.empty()) j["ipsecMode"] = self.ipsec_mode;
  }
  if (!self.ipsec_nat_address.empty()) j["ipsecNatAddress"] = self.ipsec_nat_address;
  if (!published_pod_cidrs_.empty()) j["podCIDRs"] = published_pod_cidrs_;
  j["portKeys"] = nlohmann::json::object();
  for (const auto& [ip, key] : self.port_keys) j["portKeys"][ip] = key;
  std::string file = publishDir() + "/" + self.node_name + ".json";
  if (auto made = makeDirectories(publishDir(), 0755); !made) return prefixed("publishing this node", std::move(made).takeError());
  if (auto w = writeFileAtomic(file, j.dump(2) + "\n", 0644); !w) return prefixed("publishing this node", std::move(w).takeError());
  // Said once; later publishes are port key changes, one per attach or detach.
  if (published_) {
    DPU_LOG(kDebug, kLog) << "published node " << self.node_name << " to " << file << " (" << self.port_keys.size()
                          << " port keys)";
  } else {
    DPU_LOG(kInfo, kLog) << "published node " << self.node_name << " to " << file;
  }
  published_ = true;
  return {};
}

ClusterSourceStats FileClusterSource::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

}  // namespace dpu::control
