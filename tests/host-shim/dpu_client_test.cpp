// DpuClient against a raw HTTP server on loopback that answers as scripted:
// an agent that hangs (no status line, or headers and then part of the body)
// fails the call within dpu.timeoutMs with kUnavailable and the request's
// connection closed; answers map to the ErrorCodes dpu_client.h lists.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "host-shim/dpu_client.h"

using namespace dpu;
using namespace dpu::hostshim;

namespace {

// One thread, poll over the listener and every connection. For each complete
// request (headers and Content-Length body) `reply` gives the bytes to send;
// the connection then stays open (what a hanging agent does) until the client
// closes it, which closed() counts.
class ScriptedServer {
 public:
  using Reply = std::function<std::string(const std::string& request)>;

  explicit ScriptedServer(Reply reply) : reply_(std::move(reply)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listen_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listen_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    REQUIRE(::pipe2(stop_, O_CLOEXEC) == 0);
    thread_ = std::thread([this] { run(); });
  }
  ~ScriptedServer() {
    char c = 0;
    (void)!::write(stop_[1], &c, 1);
    thread_.join();
    for (auto& [fd, buf] : conns_) ::close(fd);
    ::close(listen_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }
  int closed() const { return closed_; }

 private:
  void run() {
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}, {listen_, POLLIN, 0}};
      for (auto& [fd, buf] : conns_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) return;
      if (fds[1].revents) {
        int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) conns_[fd];
      }
      for (size_t i = 2; i < fds.size(); i++) {
        if (!fds[i].revents) continue;
        int fd = fds[i].fd;
        char chunk[4096];
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          ::close(fd);
          conns_.erase(fd);
          closed_++;
          continue;
        }
        std::string& buf = conns_[fd];
        buf.append(chunk, static_cast<size_t>(n));
        size_t end = buf.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        size_t body = 0, cl = buf.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) body = std::stoul(buf.substr(cl + 16));
        if (buf.size() < end + 4 + body) continue;
        std::string request = buf.substr(0, end + 4 + body);
        buf.erase(0, request.size());
        requests_++;
        std::string out = reply_(request);
        (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      }
    }
  }

  Reply reply_;
  int listen_ = -1, stop_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::map<int, std::string> conns_;  // the server thread's alone
  std::atomic<int> requests_{0}, closed_{0};
  std::thread thread_;
};

std::string answer(unsigned status, const std::string& body, const std::string& type = "application/x-protobuf") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

DpuConfig config(const std::string& url, uint32_t timeout_ms) {
  DpuConfig c;
  c.url = url;
  c.insecure = true;
  c.request_timeout_ms = timeout_ms;
  return c;
}

bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 500; i++) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

long long millisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("DpuClient: an agent that never answers fails the call at its deadline, once, connection closed") {
  ScriptedServer server([](const std::string&) { return std::string(); });
  DpuClient client(config(server.url(), 300));
  auto t0 = std::chrono::steady_clock::now();
  auto r = client.health();
  long long took = millisSince(t0);
  REQUIRE_FALSE(r);
  CHECK(r.code() == ErrorCode::kUnavailable);
  // Our deadline, not cpprestsdk's timer (a second later, "Connection timed out").
  CHECK_THAT(r.error(), Catch::Contains("GET /v1/health: no answer within 300 ms"));
  CHECK_THAT(r.error(), Catch::Contains("is unreachable"));
  CHECK(took >= 290);
  CHECK(took < 5000);  // a hang guard, not a speed target
  // Not retried (the bound is spent) and the cancelled request's connection let go.
  CHECK(server.requests() == 1);
  CHECK(eventually([&] { return server.closed() == 1; }));
}

TEST_CASE("DpuClient: an answer whose body stalls fails at the same deadline") {
  attach::v1::Health h;
  h.set_boot_id("b1");
  std::string full = answer(200, h.SerializeAsString() + std::string(64, 'x'));
  ScriptedServer server([&](const std::string&) { return full.substr(0, full.size() - 40); });
  DpuClient client(config(server.url(), 300));
  auto t0 = std::chrono::steady_clock::now();
  auto r = client.health();
  REQUIRE_FALSE(r);
  CHECK(r.code() == ErrorCode::kUnavailable);
  CHECK_THAT(r.error(), Catch::Contains("no whole answer within 300 ms"));
  CHECK(millisSince(t0) < 5000);
  CHECK(eventually([&] { return server.closed() == 1; }));
}

TEST_CASE("DpuClient: answers become replies or the ErrorCode of their status") {
  attach::v1::Health h;
  h.set_boot_id("b7");
  h.set_ready(true);
  attach::v1::ApiError conflict;
  conflict.set_http_status(409);
  conflict.set_message("VF 0000:03:00.2 is held");
  conflict.set_holder("sandbox-a/eth0");
  std::mutex mu;
  std::string next;
  ScriptedServer server([&](const std::string&) {
    std::lock_guard lk(mu);
    return next;
  });
  auto script = [&](std::string reply) {
    std::lock_guard lk(mu);
    next = std::move(reply);
  };
  DpuClient client(config(server.url(), 2000));

  script(answer(200, h.SerializeAsString()));
  auto ok = client.health();
  REQUIRE(ok);
  CHECK(ok->boot_id() == "b7");
  CHECK(ok->ready());

  script(answer(200, R"({"bootId": "b8", "ready": false, "reason": "syncing"})", "application/json"));
  ok = client.health();
  REQUIRE(ok);
  CHECK(ok->boot_id() == "b8");
  CHECK(ok->reason() == "syncing");

  script(answer(409, conflict.SerializeAsString()));
  auto held = client.attach(attach::v1::AttachRequest{});
  REQUIRE_FALSE(held);
  CHECK(held.code() == ErrorCode::kConflict);
  CHECK(held.failure().holder == "sandbox-a/eth0");
  CHECK_THAT(held.error(), Catch::Contains("answered 409 to POST /v1/attachments: VF 0000:03:00.2 is held"));

  script(answer(507, "no pod addresses left", "text/plain"));
  CHECK(client.attach(attach::v1::AttachRequest{}).code() == ErrorCode::kExhausted);
  script(answer(503, ""));
  CHECK(client.list().code() == ErrorCode::kUnavailable);
  script(answer(404, ""));
  CHECK(client.get("a b/c").code() == ErrorCode::kNotFound);
  script(answer(400, "bad"));
  CHECK(client.detach(attach::v1::DetachRequest{}).code() == ErrorCode::kInvalid);

  // A 200 whose body is not the reply: the agent is wrong, not unreachable.
  script(answer(200, "\xff\xff\xff"));
  auto garbled = client.health();
  REQUIRE_FALSE(garbled);
  CHECK(garbled.code() == ErrorCode::kInvalid);
  CHECK_THAT(garbled.error(), Catch::Contains("not a dpu.attach.v1.Health"));
}

TEST_CASE("DpuClient: a refused connection fails at once with kUnavailable") {
  int port;
  {
    ScriptedServer gone([](const std::string&) { return std::string(); });
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  DpuClient client(config("http://127.0.0.1:" + std::to_string(port), 2000));
  auto t0 = std::chrono::steady_clock::now();
  auto r = client.health();
  REQUIRE_FALSE(r);
  CHECK(r.code() == ErrorCode::kUnavailable);
  CHECK_THAT(r.error(), Catch::Contains("is unreachable (GET /v1/health"));
  CHECK(millisSince(t0) < 2000);
}
