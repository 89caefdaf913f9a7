// NAT keepalives through the kernel's UDP socket on the uplink (nat_keepalive.h).
#include "datapath/nat_keepalive.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "datapath/engine.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {

NatKeepalives::NatKeepalives(Engine& engine, std::string iface) : engine_(engine), iface_(std::move(iface)) {}

NatKeepalives::~NatKeepalives() { closeSocket(); }

void NatKeepalives::closeSocket() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// One socket bound to (tunnel IP, 4500): the source of our ESP in UDP, so the
// NAT sees the flow it maps. IP_FREEBIND: the address may come to the uplink
// after we start; SO_REUSEADDR: a restarted dataplane rebinds at once.
bool NatKeepalives::openFor(const IpAddress& local) {
  if (fd_ >= 0 && bound_ == local) return true;
  closeSocket();
  std::string why;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
  } else {
    const int one = 1, small = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    (void)setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
    // Nothing is read from it: the uplink's XDP program takes UDP 4500 to our tunnel IP.
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    if (!iface_.empty() &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface_.c_str(), static_cast<socklen_t>(iface_.size())) != 0) {
      why = "binding to " + iface_ + ": " + std::strerror(errno);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(4500);
      std::memcpy(&a.sin_addr, local.bytes.data(), 4);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        why = "binding to " + local.str() + ":4500: " + std::strerror(errno);
      }
    }
  }
  if (!why.empty()) {
    if (fd >= 0) ::close(fd);
    if (!warned_) {
      DPU_LOG(kWarn, "dataplane") << "NAT keepalives: " << why << "; none sent until it works";
    }
    warned_ = true;
    return false;
  }
  fd_ = fd;
  bound_ = local;
  return true;
}

void NatKeepalives::tick(std::chrono::steady_clock::time_point now) {
  const NatKeepaliveTargets t = engine_.natKeepaliveTargets();
  if (t.interval_s == 0 || t.peers.empty() || !t.local.isV4()) {
    if (t.interval_s == 0) closeSocket();
    return;
  }
  if (sent_once_ && now - last_ < std::chrono::seconds(t.interval_s)) return;
  last_ = now;
  sent_once_ = true;
  if (!openFor(t.local)) {
    failures_ += t.peers.size();
    return;
  }
  for (const auto& [address, port] : t.peers) {
    if (!address.isV4()) continue;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    std::memcpy(&to.sin_addr, address.bytes.data(), 4);
    const uint8_t payload = kPayload;
    if (::sendto(fd_, &payload, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to) == 1) {
      ++sent_;
    } else {
      ++failures_;
      if (!warned_) {
        DPU_LOG(kWarn, "dataplane") << "NAT keepalive to " << address.str() << ":" << port << ": "
                                    << std::strerror(errno) << " (said once; counted in ipsec_nat_keepalive_failures)";
      }
      warned_ = true;
    }
  }
}

void NatKeepalives::addCounters(dataplane::v1::OperatorReply& reply) const {
  namespace v1 = dataplane::v1;
  auto add = [&](const char* name, uint64_t value, const char* description) {
    auto* c = reply.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_description(description);
    c->set_kind(v1::COUNTER_EVENT);
  };
  add("ipsec_nat_keepalives_sent", sent_,
      "NAT keepalives sent (RFC 3948 §2.2: one 0xff byte in UDP 4500 to each remote node, ipsec natKeepaliveSeconds)");
  add("ipsec_nat_keepalive_failures", failures_, "NAT keepalives the kernel refused to send (no route, no address)");
}

}  // namespace dpu::datapath
