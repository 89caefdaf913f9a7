// The HTTP side of the Prometheus endpoint (metrics.h): a listener on its own
// thread, one bounded request per connection, the counters fetched from the
// dataplane's operator socket for each scrape.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/ipc_proto.h"
#include "common/log.h"
#include "datapath/metrics.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {
namespace {

using namespace std::chrono_literals;
namespace v1 = dataplane::v1;

// A scraper sends its request at once; a client that does not is cut off
// after this, so it holds the endpoint (never the dataplane) that long at most.
constexpr auto kRequestDeadline = 2s;
constexpr auto kResponseDeadline = 5s;
constexpr auto kOperatorDeadline = 2s;
constexpr size_t kMaxRequestBytes = 8192;

int remainingMs(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// The request head (up to the blank line), or "" on timeout, close or overflow.
std::string readHead(int fd, bool& too_large) {
  const auto deadline = std::chrono::steady_clock::now() + kRequestDeadline;
  std::string head;
  too_large = false;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (head.size() > kMaxRequestBytes) {
      too_large = true;
      return "";
    }
    pollfd p{fd, POLLIN, 0};
    const int left = remainingMs(deadline);
    if (left == 0 || ::poll(&p, 1, left) <= 0) return "";
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

void writeAll(int fd, const std::string& data) {
  const auto deadline = std::chrono::steady_clock::now() + kResponseDeadline;
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return;
    pollfd p{fd, POLLOUT, 0};
    const int left = remainingMs(deadline);
    if (left == 0 || ::poll(&p, 1, left) <= 0) return;
  }
}

const char* reasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string response(int status, const std::string& content_type, const std::string& body) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reasonPhrase(status) + "\r\n";
  r += "Content-Type: " + content_type + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 405) r += "Allow: GET\r\n";
  r += "Connection: close\r\n\r\n";
  return r + body;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(MetricsConfig config, std::string operator_socket)
    : config_(std::move(config)), operator_socket_(std::move(operator_socket)) {}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

Result<void> MetricsEndpoint::start() {
  const std::string where = (config_.address.find(':') != std::string::npos ? "[" + config_.address + "]"
                                                                            : config_.address) +
                            ":" + std::to_string(config_.port);
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  if (config_.address.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(config_.port);
    if (inet_pton(AF_INET6, config_.address.c_str(), &a6->sin6_addr) != 1)
      return Error{"metrics.listen: " + config_.address + " is not an IPv6 address", ErrorCode::kInvalid};
    family = AF_INET6;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(config_.port);
    if (inet_pton(AF_INET, config_.address.c_str(), &a4->sin_addr) != 1)
      return Error{"metrics.listen: " + config_.address + " is not an IPv4 address", ErrorCode::kInvalid};
    len = sizeof(sockaddr_in);
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Error{"metrics endpoint: socket: " + std::string(std::strerror(errno))};
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{"metrics endpoint: cannot listen on " + where + ": " + std::strerror(err) +
                     (err == EADDRNOTAVAIL ? " (no interface has that address: fix metrics.listen)" : ""),
                 err == EADDRINUSE ? ErrorCode::kConflict : ErrorCode::kUnavailable};
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  bound_port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(fd);
    return Error{"metrics endpoint: eventfd: " + std::string(std::strerror(errno))};
  }
  listen_fd_ = fd;
  thread_ = std::thread([this] { serve(); });
  DPU_LOG(kInfo, "dataplane") << "Prometheus metrics on http://" << where << "/metrics";
  return {};
}

void MetricsEndpoint::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void MetricsEndpoint::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      DPU_LOG(kError, "dataplane") << "metrics endpoint stops: poll: " << std::strerror(errno);
      return;
    }
    if (fds[1].revents & POLLIN) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    handle(fd);
    ::close(fd);
  }
}

void MetricsEndpoint::handle(int fd) {
  bool too_large = false;
  const std::string head = readHead(fd, too_large);
  if (head.empty()) {
    if (too_large) writeAll(fd, response(400, "text/plain", "request head larger than 8 KiB\n"));
    return;
  }
  const size_t eol = head.find("\r\n");
  const std::string line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    writeAll(fd, response(400, "text/plain", "malformed request line; send GET /metrics HTTP/1.1\n"));
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  if (path != "/metrics" && path != "/healthz") {
    writeAll(fd, response(404, "text/plain", "no such resource " + path + "; the metrics are at /metrics\n"));
    return;
  }
  if (method != "GET") {
    writeAll(fd, response(405, "text/plain", "use GET\n"));
    return;
  }
  if (path == "/healthz") {
    writeAll(fd, response(200, "text/plain", "ok\n"));
    return;
  }
  int status = 200;
  std::string body = scrape(status);
  writeAll(fd, response(status, status == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain", body));
}

std::string MetricsEndpoint::scrape(int& status) const {
  v1::OperatorRequest requests[5];
  requests[0].mutable_ports();
  requests[1].mutable_stats();
  requests[2].mutable_services();
  // The counts per state and the fill come with any conntrack answer; one
  // listed entry keeps the answer small.
  requests[3].mutable_conntrack()->set_limit(1);
  requests[4].mutable_ipsec();
  v1::OperatorReply replies[5];
  for (size_t i = 0; i < 5; ++i) {
    auto reply = ipc::call<v1::OperatorReply>(operator_socket_, requests[i], ipc::after(kOperatorDeadline));
    const std::string error = !reply ? reply.error() : reply->error();
    if (!error.empty()) {
      status = 503;
      return "the dataplane's operator API (" + operator_socket_ + ") did not answer: " + error + "\n";
    }
    replies[i] = std::move(*reply);
  }
  status = 200;
  return renderMetrics(replies[0], replies[1], replies[2], replies[3], &replies[4]);
}

}  // namespace dpu::datapath
