// Underlay next hops from the kernel's tables (dataplane_neighbours.h).
#include "datapath/dataplane_neighbours.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "datapath/engine.h"

namespace dpu::datapath {
namespace {

using namespace std::chrono_literals;

// /proc/net/route prints each address as the hex of the in-memory (network
// order) u32: reading it back and converting with ntohl gives host order.
uint32_t procHex(const std::string& field) {
  uint32_t raw = static_cast<uint32_t>(std::stoul(field, nullptr, 16));
  return ntohl(raw);
}

std::string readAll(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<KernelRoute> parseProcRoute(std::string_view text, const std::string& iface) {
  std::vector<KernelRoute> routes;
  std::istringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string dev, dest, gw, flags, refcnt, use, metric, mask;
    if (!(f >> dev >> dest >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
    if (dev != iface) continue;
    try {
      unsigned long fl = std::stoul(flags, nullptr, 16);
      if (!(fl & 0x1)) continue;  // RTF_UP
      KernelRoute r;
      r.destination = procHex(dest);
      r.gateway = (fl & 0x2) ? procHex(gw) : 0;  // RTF_GATEWAY
      r.mask = procHex(mask);
      r.metric = static_cast<uint32_t>(std::stoul(metric));
      routes.push_back(r);
    } catch (...) {
      continue;
    }
  }
  return routes;
}

std::map<uint32_t, MacAddress> parseProcArp(std::string_view text, const std::string& iface) {
  std::map<uint32_t, MacAddress> out;
  std::istringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string ip, hwtype, flags, mac, mask, dev;
    if (!(f >> ip >> hwtype >> flags >> mac >> mask >> dev)) continue;
    if (dev != iface) continue;
    try {
      if (!(std::stoul(flags, nullptr, 16) & 0x2)) continue;  // ATF_COM: resolved
    } catch (...) {
      continue;
    }
    auto addr = IpAddress::parse(ip);
    auto hw = MacAddress::parse(mac);
    if (!addr || !hw || !addr->isV4() || hw->isZero()) continue;
    out[addr->v4HostOrder()] = *hw;
  }
  return out;
}

std::optional<uint32_t> nextHopFor(const std::vector<KernelRoute>& routes, uint32_t peer) {
  const KernelRoute* best = nullptr;
  for (const auto& r : routes) {
    if ((peer & r.mask) != (r.destination & r.mask)) continue;
    if (!best || __builtin_popcount(r.mask) > __builtin_popcount(best->mask) ||
        (r.mask == best->mask && r.metric < best->metric))
      best = &r;
  }
  if (!best) return std::nullopt;
  return best->gateway ? best->gateway : peer;
}

TunnelNeighbours::TunnelNeighbours(Engine& engine, std::string iface, std::map<IpAddress, MacAddress> static_hops)
    : engine_(engine), iface_(std::move(iface)), static_(std::move(static_hops)) {}

void TunnelNeighbours::refresh() {
  std::vector<IpAddress> peers = engine_.wantedTunnelPeers();
  unresolved_.clear();
  if (peers.empty()) return;
  std::vector<KernelRoute> routes;
  std::map<uint32_t, MacAddress> arp;
  if (!iface_.empty()) {
    routes = parseProcRoute(readAll("/proc/net/route"), iface_);
    arp = parseProcArp(readAll("/proc/net/arp"), iface_);
  }
  for (const auto& peer : peers) {
    std::optional<MacAddress> mac;
    if (auto s = static_.find(peer); s != static_.end()) {
      mac = s->second;
    } else if (!iface_.empty() && peer.isV4()) {
      if (auto hop = nextHopFor(routes, peer.v4HostOrder())) {
        if (auto a = arp.find(*hop); a != arp.end()) mac = a->second;
      }
      if (!mac) probe(peer);
    }
    if (!mac) {
      unresolved_.push_back(peer);
      continue;
    }
    auto told = told_.find(peer);
    if (told != told_.end() && told->second == *mac) continue;
    if (auto set = engine_.setTunnelNextHop(peer, *mac); !set) {
      DPU_LOG(kWarn, "dataplane") << "next hop for " << peer.str() << ": " << set.error();
      continue;
    }
    DPU_LOG(kInfo, "dataplane") << "tunnel peer " << peer.str() << " via " << mac->str();
    told_[peer] = *mac;
  }
}

bool TunnelNeighbours::resolving() const {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& peer : unresolved_) {
    auto p = probed_.find(peer);
    if (p != probed_.end() && now - p->second < 2s) return true;
  }
  return false;
}

void TunnelNeighbours::probe(const IpAddress& peer) {
  auto now = std::chrono::steady_clock::now();
  if (auto p = probed_.find(peer); p != probed_.end() && now - p->second < 1s) return;
  probed_[peer] = now;
  // A datagram to the discard port makes the kernel resolve the next hop; the
  // peer's XDP program passes it to its kernel, which ignores it.
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface_.c_str(), static_cast<socklen_t>(iface_.size()));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  std::memcpy(&to.sin_addr, peer.bytes.data(), 4);
  (void)::sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  ::close(fd);
}

}  // namespace dpu::datapath
