// fake_dpu_api: a stand-in for the DPU agent's attach API
// (proto/dpu/attach/v1/attach.proto) over REST, for host-shim's system tests
// and the lab. The state and rules are FakeDpuState's (fake_dpu_state.h: IPAM,
// 409 naming the holder, idempotent re-attach of the same network + sandbox +
// ifname, detach, list, reconcile, health with a boot id); this file is the
// HTTP side: protobuf and JSON bodies both work (Content-Type decides; the
// answer follows Accept), errors carry an ApiError with the agent's statuses.
//
// Test controls (not part of the contract):
//   POST /test/reboot[?cidr=P]            new boot id, every attachment forgotten
//                                         (and, with cidr, a new pod CIDR: URL-encode the '/')
//   POST /test/down?seconds=N&mode=hang   for N s (or until /test/up), /v1 requests wait, then are
//                                         served (an agent stopped with SIGSTOP, then continued)
//   POST /test/down?seconds=N&mode=refuse for N s, /v1 requests get 503 at once
//   POST /test/unhealthy?on=1             health says ready=false (on=0 undoes)
//   POST /test/fail?count=N&status=S      the next N attach calls fail with status S
//   POST /test/answer-mtu?mtu=N           the next attach answers MTU N (one the device may refuse)
//   POST /test/dataplane-state?id=ID&state=TEXT   attachment ID's dataplane_state (default
//                                         "programmed"; without id: every attachment's, new ones too)
//   GET  /test/attachments                what GET /v1/attachments lists, also while "down" (what a
//                                         stopped agent keeps in its checkpoint)
//
//   fake_dpu_api --listen http://127.0.0.1:9443 --pod-cidr 10.244.1.0/24
//                [--vfs 8] [--mtu 1400] [--node-name node1]
//                [--cluster-cidr 10.244.0.0/16] [--service-cidr 10.96.0.0/12]
//                [--tls-cert FILE --tls-key FILE [--client-ca FILE]]   (https; mTLS with --client-ca)
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <cpprest/http_listener.h>

#include "dpu/attach/v1/attach.pb.h"
#include "fake_dpu_state.h"
#include "leak_check.h"

namespace http = web::http;
using namespace dpu;
namespace av1 = dpu::attach::v1;
using Clock = std::chrono::steady_clock;

namespace {

// Answers without waiting for the answer to be sent, as dpu-agent's API
// server does. A handler runs on the listener's thread pool, which also sends
// the answers: handlers that each waited for their own answer starved it, and
// 50 concurrent requests (more than its 40 threads) all hung until their
// clients gave up.
void send(http::http_request& req, http::http_response resp) {
  req.reply(resp).then([](pplx::task<void> t) {
    try {
      t.get();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fake_dpu_api: an answer was not delivered: %s\n", e.what());
    }
  });
}

void send(http::http_request& req, http::status_code status, const std::string& body,
          const std::string& content_type = "text/plain") {
  http::http_response resp(status);
  resp.set_body(body, content_type);
  send(req, std::move(resp));
}

struct Options {
  std::string listen = "http://127.0.0.1:9443";
  dpu::fakes::FakeDpuOptions dpu;
  std::string tls_cert, tls_key, client_ca;
};

class FakeDpu {
 public:
  explicit FakeDpu(std::unique_ptr<dpu::fakes::FakeDpuState> state) : state_(std::move(state)) {}

  void handle(http::http_request req) {
    std::string path = utility::conversions::to_utf8string(req.relative_uri().path());
    auto query = http::uri::split_query(req.relative_uri().query());
    if (path.rfind("/test/", 0) == 0) return testControl(req, path, query);
    Clock::time_point until;
    std::string mode;
    {
      std::lock_guard lk(mu_);
      until = down_until_;
      mode = down_mode_;
    }
    if (Clock::now() < until) {
      if (mode == "hang") {
        // As an agent stopped with SIGSTOP: the request waits, and is served
        // when the hang ends (its client has long given up by then).
        std::thread([this, req]() mutable {
          {
            std::unique_lock lk(mu_);
            while (Clock::now() < down_until_) {
              const auto until = down_until_;  // /test/up moves it
              up_cv_.wait_until(lk, until);
            }
          }
          std::fprintf(stderr, "fake_dpu_api: served %s %s after the hang\n", std::string(req.method()).c_str(),
                       utility::conversions::to_utf8string(req.relative_uri().path()).c_str());
          readThenServe(req);  // its client gave up long ago: send() says the answer had nowhere to go
        }).detach();
        return;
      }
      send(req, http::status_codes::ServiceUnavailable, "the fake DPU is down");
      return;
    }
    readThenServe(req);
  }

 private:
  // The body is read as dpu-agent reads it, without blocking a thread of the
  // pool that does the reading; then the request is served.
  void readThenServe(http::http_request req) {
    req.extract_vector().then([this, req](pplx::task<std::vector<unsigned char>> t) mutable {
      std::string body;
      try {
        const auto v = t.get();
        body.assign(v.begin(), v.end());
      } catch (const std::exception& e) {
        return send(req, 400, std::string("cannot read the request body: ") + e.what() + "\n");
      }
      try {
        serve(req, body);
      } catch (const std::exception& e) {
        send(req, 500, std::string("fake_dpu_api: ") + e.what());
      }
    });
  }

  void serve(http::http_request& req, const std::string& body) {
    std::string path = utility::conversions::to_utf8string(req.relative_uri().path());
    auto method = req.method();
    if (path == "/v1/health" && method == http::methods::GET) return reply(req, 200, state_->health());
    if (path == "/v1/attachments" && method == http::methods::GET) return reply(req, 200, state_->list());
    if (path == "/v1/attachments" && method == http::methods::POST) {
      av1::AttachRequest r;
      std::string why;
      if (!parseBody(req, body, r, why)) return error(req, 400, why);
      return answer(req, state_->attach(r));
    }
    if (path == "/v1/attachments:detach" && method == http::methods::POST) {
      av1::DetachRequest d;
      std::string why;
      if (!parseBody(req, body, d, why)) return error(req, 400, why);
      return answer(req, state_->detach(d));
    }
    if (path == "/v1/attachments:reconcile" && method == http::methods::POST) {
      av1::ReconcileRequest r;
      std::string why;
      if (!parseBody(req, body, r, why)) return error(req, 400, why);
      return answer(req, state_->reconcile(r));
    }
    if (path.rfind("/v1/attachments/", 0) == 0 && method == http::methods::GET)
      return answer(req, state_->get(path.substr(std::string("/v1/attachments/").size())));
    if (path.rfind("/v1/attachments/", 0) == 0 && method == http::methods::DEL) {
      av1::DetachRequest d;
      d.set_id(path.substr(std::string("/v1/attachments/").size()));
      return answer(req, state_->detach(d));
    }
    error(req, 404, "no such endpoint: " + std::string(method) + " " + path);
  }

  static bool wantsJson(const http::http_request& req) {
    auto accept = req.headers().find(U("Accept"));
    if (accept != req.headers().end()) {
      if (accept->second.find(U("json")) != utility::string_t::npos) return true;
      if (accept->second.find(U("protobuf")) != utility::string_t::npos) return false;
    }
    return req.headers().content_type().find(U("json")) != utility::string_t::npos;
  }

  static void reply(http::http_request& req, unsigned status, const google::protobuf::Message& m) {
    if (wantsJson(req)) {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = false;
      (void)google::protobuf::util::MessageToJsonString(m, &out, o);
      send(req, static_cast<http::status_code>(status), out, "application/json");
      return;
    }
    std::string bytes = m.SerializeAsString();
    http::http_response resp(status);
    resp.set_body(std::vector<unsigned char>(bytes.begin(), bytes.end()));
    resp.headers().set_content_type(U("application/x-protobuf"));
    send(req, std::move(resp));
  }

  static void error(http::http_request& req, unsigned status, const std::string& msg, const std::string& holder = "") {
    av1::ApiError e;
    e.set_http_status(status);
    e.set_message(msg);
    e.set_holder(holder);
    reply(req, status, e);
  }

  template <typename T>
  static void answer(http::http_request& req, const dpu::Result<T>& r) {
    if (r) return reply(req, 200, *r);
    error(req, dpu::fakes::FakeDpuState::httpStatusOf(r.code()), r.error(), r.failure().holder);
  }

  static bool parseBody(http::http_request& req, const std::string& bytes, google::protobuf::Message& m,
                        std::string& why) {
    if (req.headers().content_type().find(U("json")) != utility::string_t::npos) {
      auto st = google::protobuf::util::JsonStringToMessage(bytes, &m);
      if (!st.ok()) {
        why = "body is not a JSON " + m.GetTypeName() + ": " + st.ToString();
        return false;
      }
      return true;
    }
    if (!m.ParseFromString(bytes)) {
      why = "body is not a protobuf " + m.GetTypeName();
      return false;
    }
    return true;
  }

  void testControl(http::http_request& req, const std::string& path,
                   std::map<utility::string_t, utility::string_t>& q) {
    auto num = [&](const char* key, long fallback) {
      auto it = q.find(U(key));
      return it == q.end() ? fallback : std::stol(it->second);
    };
    if (path == "/test/attachments") return reply(req, 200, state_->list());
    if (path == "/test/reboot") {
      std::string cidr;
      if (auto it = q.find(U("cidr")); it != q.end()) cidr = http::uri::decode(it->second);
      if (auto r = state_->reboot(cidr); !r) {
        send(req, 400, r.error() + "\n");
        return;
      }
    } else if (path == "/test/down") {
      std::lock_guard lk(mu_);
      down_until_ = Clock::now() + std::chrono::seconds(num("seconds", 5));
      auto it = q.find(U("mode"));
      down_mode_ = it == q.end() ? "hang" : it->second;
    } else if (path == "/test/up") {
      {
        std::lock_guard lk(mu_);
        down_until_ = {};
      }
      up_cv_.notify_all();
    } else if (path == "/test/unhealthy") {
      state_->setUnhealthy(num("on", 1) != 0);
    } else if (path == "/test/answer-mtu") {
      state_->answerMtuOnce(static_cast<uint32_t>(num("mtu", 0)));
    } else if (path == "/test/dataplane-state") {
      auto state = q.find(U("state"));
      auto id = q.find(U("id"));
      state_->setDataplaneState(id == q.end() ? "" : http::uri::decode(id->second),
                                state == q.end() ? "programmed" : http::uri::decode(state->second));
    } else if (path == "/test/fail") {
      auto status = static_cast<unsigned>(num("status", 500));
      state_->failAttaches(static_cast<int>(num("count", 1)),
                           dpu::Error{"injected failure (POST /test/fail)",
                                      dpu::fakes::FakeDpuState::codeOfHttpStatus(status)});
    } else {
      send(req, 404, "unknown test control " + path);
      return;
    }
    send(req, 200, "ok\n");
  }

  std::unique_ptr<dpu::fakes::FakeDpuState> state_;
  std::mutex mu_;
  std::condition_variable up_cv_;
  Clock::time_point down_until_{};
  std::string down_mode_ = "hang";
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fake_dpu_api: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--listen")
      o.listen = next();
    else if (a == "--pod-cidr")
      o.dpu.pod_cidr = next();
    else if (a == "--vfs")
      o.dpu.vfs = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--mtu")
      o.dpu.mtu = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--node-name")
      o.dpu.node_name = next();
    else if (a == "--cluster-cidr")
      o.dpu.cluster_cidr = next();
    else if (a == "--service-cidr")
      o.dpu.service_cidr = next();
    else if (a == "--tls-cert")
      o.tls_cert = next();
    else if (a == "--tls-key")
      o.tls_key = next();
    else if (a == "--client-ca")
      o.client_ca = next();
    else {
      std::fprintf(stderr,
                   "usage: fake_dpu_api --listen http://127.0.0.1:9443 --pod-cidr 10.244.1.0/24 [--vfs 8] [--mtu 1400] "
                   "[--node-name NAME] [--cluster-cidr CIDR] [--service-cidr CIDR] [--tls-cert FILE --tls-key FILE "
                   "[--client-ca FILE]]\n");
      return 2;
    }
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  auto state = dpu::fakes::FakeDpuState::create(o.dpu);
  if (!state) {
    std::fprintf(stderr, "fake_dpu_api: --pod-cidr: %s\n", state.error().c_str());
    return 2;
  }
  try {
    FakeDpu dpu(std::move(*state));
    http::experimental::listener::http_listener_config config;
    if (!o.tls_cert.empty()) {
      config.set_ssl_context_callback([&o](boost::asio::ssl::context& ctx) {
        ctx.set_options(boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
                        boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
                        boost::asio::ssl::context::no_tlsv1_1);
        ctx.use_certificate_chain_file(o.tls_cert);
        ctx.use_private_key_file(o.tls_key, boost::asio::ssl::context::pem);
        if (!o.client_ca.empty()) {
          // mTLS: only clients with a certificate from this CA get in.
          ctx.load_verify_file(o.client_ca);
          ctx.set_verify_mode(boost::asio::ssl::verify_peer | boost::asio::ssl::verify_fail_if_no_peer_cert);
        }
      });
    }
    http::experimental::listener::http_listener listener(utility::conversions::to_string_t(o.listen), config);
    listener.support([&](http::http_request req) {
      try {
        dpu.handle(req);
      } catch (const std::exception& e) {
        send(req, 500, std::string("fake_dpu_api: ") + e.what());
      }
    });
    listener.open().wait();
    std::fprintf(stderr, "fake_dpu_api: listening on %s, pod CIDR %s\n", o.listen.c_str(), o.dpu.pod_cidr.c_str());
    int sig = 0;
    sigwait(&sigs, &sig);
    listener.close().wait();
    // Leaks checked before exit stops cpprest's pool under the closed
    // connections' work (support/leak_check.h).
    return dpu::test::checkLeaksNow(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_dpu_api: %s\n", e.what());
    return 1;
  }
  return 0;
}
