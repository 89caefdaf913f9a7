// The attach API's listener over a real socket: a body over the limit is
// refused while it is read, for a declared length and for a chunked body.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "control/api_router.h"
#include "control/api_server.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::readyAgent;
using dpu::control::testing::TempDir;

namespace {

uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Sent {
  size_t body_bytes = 0;  // how much of the body went out before the answer came
  std::string answer;
};

// Sends `head`, then up to `body_total` body bytes from `next_piece`, and stops
// sending as soon as the server answers; returns what it answered.
Sent exchange(uint16_t port, const std::string& head, size_t body_total,
              const std::function<std::string(size_t)>& next_piece) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  Sent s;
  std::string out = head;
  size_t off = 0;
  bool answered = false;
  while (!answered) {
    if (off == out.size() && s.body_bytes < body_total) {
      std::string piece = next_piece(s.body_bytes);
      out = piece;
      off = 0;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (off < out.size() ? POLLOUT : 0)), 0};
    REQUIRE(::poll(&p, 1, -1) == 1);
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      answered = true;
      break;
    }
    ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) break;  // the server closed: read what it said
    off += static_cast<size_t>(n);
    if (off == out.size() && out != head) s.body_bytes += out.size();
  }
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) s.answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return s;
}

struct Server {
  TempDir dir;
  ModelState model;
  std::unique_ptr<Agent> agent;
  std::unique_ptr<ApiRouter> router;
  std::unique_ptr<ApiServer> server;
  uint16_t port = freePort();
  Server() {
    agent = readyAgent(dir.path(), model);
    REQUIRE(agent);
    router = std::make_unique<ApiRouter>(*agent, ApiRouter::Hooks{});
    server = std::make_unique<ApiServer>(*router, "http://127.0.0.1:" + std::to_string(port), TlsConfig{});
    auto r = server->start();
    REQUIRE(r.ok());
  }
};

constexpr size_t kHuge = 256u << 20;  // far more than socket buffers hold: only a server that reads takes it all
const std::string kPiece(16 * 1024, 'x');

}  // namespace

TEST_CASE("a body over the limit gets 413 while it is sent, and the server stays responsive") {
  Server s;
  SECTION("chunked") {
    auto r = exchange(s.port,
                      "POST /v1/attachments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n",
                      kHuge, [](size_t) { return "4000\r\n" + kPiece + "\r\n"; });
    INFO(r.answer.substr(0, 400));
    CHECK(r.answer.rfind("HTTP/1.1 413", 0) == 0);
    CHECK(r.answer.find("limit of " + std::to_string(kMaxBodyBytes) + " bytes") != std::string::npos);
    CHECK(r.body_bytes < kHuge);
  }
  SECTION("Content-Length") {
    auto r = exchange(s.port,
                      "POST /v1/attachments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: " + std::to_string(kHuge) + "\r\n\r\n",
                      kHuge, [](size_t) { return kPiece; });
    INFO(r.answer.substr(0, 400));
    CHECK(r.answer.rfind("HTTP/1.1 413", 0) == 0);
    CHECK(r.answer.find("limit of " + std::to_string(kMaxBodyBytes) + " bytes") != std::string::npos);
    CHECK(r.body_bytes < kHuge);
  }
  // A valid chunked attach on a new connection is served.
  const std::string body =
      R"({"kind":"POD","pod":{"namespace":"default","name":"web-1"},"sandboxId":"s1","ifname":"eth0","pfIndex":0,"vfIndex":3})";
  char len[16];
  std::snprintf(len, sizeof len, "%zx", body.size());
  auto ok = exchange(s.port,
                     "POST /v1/attachments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n" + std::string(len) + "\r\n" + body + "\r\n0\r\n\r\n",
                     0, [](size_t) { return std::string(); });
  INFO(ok.answer);
  CHECK(ok.answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(s.router->statusCounts()[413] == 1);
}
