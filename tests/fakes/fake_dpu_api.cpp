// fake_dpu_api: a stand-in for the DPU agent's attach API
// (proto/dpu/attach/v1/attach.proto) with real state, for host-shim's tests and
// the lab: IPAM over a pod CIDR (gateway .1 and the management address .2
// reserved, an address is never handed out twice), MAC derived from the IP,
// 409 with the holder when a VF is taken, idempotent re-attach of the same
// sandbox+ifname, detach, list, and health with a boot id. Protobuf and JSON
// bodies both work (Content-Type decides; the answer follows Accept).
//
// Test controls (not part of the contract):
//   POST /test/reboot[?cidr=P]            new boot id, every attachment forgotten
//                                         (and, with cidr, a new pod CIDR: URL-encode the '/')
//   POST /test/down?seconds=N&mode=hang   for N s, /v1 requests hang until the end, then 503
//   POST /test/down?seconds=N&mode=refuse for N s, /v1 requests get 503 at once
//   POST /test/unhealthy?on=1             health says ready=false (on=0 undoes)
//   POST /test/fail?count=N&status=S      the next N attach calls fail with status S
//   POST /test/answer-mtu?mtu=N           the next attach answers MTU N (one the device may refuse)
//
// It validates and answers as dpu-agent (dpu-agent/control) does: POD needs
// sandbox_id and a legal ifname, the pod's namespace/name are free-form labels
// (as with a file cluster source), requested_mtu is 0 or 576..--mtu, one MANAGEMENT
// attachment (no sandbox_id) whose routes are --cluster-cidr/--service-cidr
// via the gateway, detach by exactly one selector, 507 when the CIDR is full.
//
//   fake_dpu_api --listen http://127.0.0.1:9443 --pod-cidr 10.244.1.0/24
//                [--vfs 8] [--mtu 1400] [--node-name node1]
//                [--cluster-cidr 10.244.0.0/16] [--service-cidr 10.96.0.0/12]
//                [--tls-cert FILE --tls-key FILE [--client-ca FILE]]   (https; mTLS with --client-ca)
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <cpprest/http_listener.h>

#include "common/net_address.h"
#include "dpu/attach/v1/attach.pb.h"

namespace http = web::http;
using namespace dpu;
namespace av1 = dpu::attach::v1;
using Clock = std::chrono::steady_clock;

namespace {

std::string randomId() {
  static std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

struct Options {
  std::string listen = "http://127.0.0.1:9443";
  std::string pod_cidr = "10.244.1.0/24";
  uint32_t vfs = 8;
  uint32_t mtu = 1400;
  std::string node_name = "node1";
  std::string cluster_cidr = "10.244.0.0/16";
  std::string service_cidr = "10.96.0.0/12";
  std::string tls_cert, tls_key, client_ca;
};

class FakeDpu {
 public:
  explicit FakeDpu(Options o) : opt_(std::move(o)) {
    auto p = IpPrefix::parse(opt_.pod_cidr);
    if (!p) throw std::runtime_error("--pod-cidr: " + p.error());
    cidr_ = *p;
    boot_id_ = randomId();
  }

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
        std::thread([req, until]() mutable {
          std::this_thread::sleep_until(until);
          req.reply(http::status_codes::ServiceUnavailable, "the fake DPU was down").wait();
        }).detach();
        return;
      }
      req.reply(http::status_codes::ServiceUnavailable, "the fake DPU is down").wait();
      return;
    }
    auto method = req.method();
    if (path == "/v1/health" && method == http::methods::GET) return health(req);
    if (path == "/v1/attachments" && method == http::methods::GET) return list(req);
    if (path == "/v1/attachments" && method == http::methods::POST) return attach(req);
    if (path == "/v1/attachments:detach" && method == http::methods::POST) return detachBody(req);
    if (path.rfind("/v1/attachments/", 0) == 0 && method == http::methods::DEL) {
      av1::DetachRequest d;
      d.set_id(path.substr(std::string("/v1/attachments/").size()));
      return detach(req, d);
    }
    error(req, 404, "no such endpoint: " + std::string(method) + " " + path);
  }

 private:
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
      req.reply(status, out, "application/json").wait();
      return;
    }
    std::string bytes = m.SerializeAsString();
    http::http_response resp(status);
    resp.set_body(std::vector<unsigned char>(bytes.begin(), bytes.end()));
    resp.headers().set_content_type(U("application/x-protobuf"));
    req.reply(resp).wait();
  }

  static void error(http::http_request& req, unsigned status, const std::string& msg, const std::string& holder = "") {
    av1::ApiError e;
    e.set_http_status(status);
    e.set_message(msg);
    e.set_holder(holder);
    reply(req, status, e);
  }

  static bool printableLabel(const std::string& s) {
    if (s.size() > 253) return false;
    for (unsigned char c : s)
      if (c < ' ' || c == 0x7f) return false;
    return true;
  }

  static bool parseBody(http::http_request& req, google::protobuf::Message& m, std::string& why) {
    auto data = req.extract_vector().get();
    std::string bytes(data.begin(), data.end());
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

  void health(http::http_request& req) {
    av1::Health h;
    std::lock_guard lk(mu_);
    h.set_boot_id(boot_id_);
    h.set_ready(!unhealthy_);
    h.set_version("fake-0.1");
    h.set_node_name(opt_.node_name);
    if (unhealthy_) h.set_reason("the test said so (POST /test/unhealthy)");
    reply(req, 200, h);
  }

  void list(http::http_request& req) {
    av1::AttachmentList l;
    std::lock_guard lk(mu_);
    l.set_boot_id(boot_id_);
    for (const auto& [id, a] : attachments_) *l.add_attachments() = a;
    reply(req, 200, l);
  }

  // The next free pod address: .1 is the gateway, .2 the management port;
  // next-fit so a released address is not handed out again at once.
  std::optional<IpAddress> allocate() {
    uint64_t size = cidr_.size();
    for (uint64_t n = 0; n + 4 < size; ++n) {
      uint64_t off = 3 + (next_ + n) % (size - 4);
      IpAddress ip = cidr_.at(off);
      if (!used_.count(ip)) {
        next_ = off - 3 + 1;
        return ip;
      }
    }
    return std::nullopt;
  }

  void attach(http::http_request& req) {
    av1::AttachRequest r;
    std::string why;
    if (!parseBody(req, r, why)) return error(req, 400, why);
    std::lock_guard lk(mu_);
    if (fail_count_ > 0) {
      --fail_count_;
      return error(req, fail_status_, "injected failure (POST /test/fail)");
    }
    if (r.kind() != av1::POD && r.kind() != av1::MANAGEMENT) return error(req, 400, "kind must be POD or MANAGEMENT");
    if (r.vf_index() >= opt_.vfs)
      return error(req, 400,
                   "vf_index " + std::to_string(r.vf_index()) + " is out of range (this DPU has " +
                       std::to_string(opt_.vfs) + " VFs)");
    if (r.kind() == av1::POD && (r.sandbox_id().empty() || r.ifname().empty() || r.ifname().size() > 15))
      return error(req, 400, "a POD attachment needs sandbox_id and an ifname of 1-15 characters");
    if (r.kind() == av1::MANAGEMENT && !r.sandbox_id().empty())
      return error(req, 400, "a MANAGEMENT attachment has no sandbox_id: it stays in the host netns");
    // As dpu-agent with a file cluster source: the pod identity is a label
    // (podman sends only K8S_POD_NAME, a bare libcni caller nothing).
    if (!printableLabel(r.pod().namespace_()) || !printableLabel(r.pod().name()))
      return error(req, 400, "pod.namespace and pod.name must be at most 253 printable characters");
    if (r.requested_mtu() != 0 && (r.requested_mtu() < 576 || r.requested_mtu() > opt_.mtu))
      return error(req, 400,
                   "requested_mtu " + std::to_string(r.requested_mtu()) + " must be between 576 and the pod MTU " +
                       std::to_string(opt_.mtu));
    MacAddress requested;
    if (!r.requested_mac().empty()) {
      auto m = MacAddress::parse(r.requested_mac());
      if (!m || m->isMulticast() || m->isZero())
        return error(req, 400, "requested_mac '" + r.requested_mac() + "' is not a unicast MAC");
      requested = *m;
    }
    for (const auto& [id, a] : attachments_) {
      bool same_vf = a.pf_index() == r.pf_index() && a.vf_index() == r.vf_index();
      bool same_owner = a.kind() == r.kind() && a.sandbox_id() == r.sandbox_id() && a.ifname() == r.ifname();
      if (same_vf && same_owner) {
        av1::AttachResponse resp;
        *resp.mutable_attachment() = a;
        resp.set_boot_id(boot_id_);
        return reply(req, 200, resp);
      }
      if (same_vf)
        return error(req, 409,
                     "VF " + std::to_string(r.vf_index()) + " of PF " + std::to_string(r.pf_index()) +
                         " is held by attachment " + id + " (" + a.sandbox_id() + "/" + a.ifname() + ")",
                     id);
      if (same_owner)
        return error(req, 409,
                     r.kind() == av1::MANAGEMENT
                         ? "the management port is already attached on VF " + std::to_string(a.vf_index())
                         : r.sandbox_id() + "/" + r.ifname() + " is already attached on VF " + std::to_string(a.vf_index()),
                     id);
    }
    // One MAC, one attachment (port security keys on it), as dpu-agent refuses.
    for (const auto& [id, a] : attachments_)
      if (!r.requested_mac().empty() && a.mac() == requested.str())
        return error(req, 409, "MAC " + requested.str() + " is already used by attachment " + id, id);
    // requested_ips as dpu-agent checks them (one IPv4 pod CIDR here).
    std::optional<IpAddress> wanted;
    if (r.requested_ips_size() > 0 && r.kind() != av1::POD)
      return error(req, 400, "requested_ips is for POD attachments: the management port's address is fixed");
    for (const auto& text : r.requested_ips()) {
      auto w = IpAddress::parse(text);
      if (!w) return error(req, 400, "requested_ips: '" + text + "' is not an IP address (give it without prefix length)");
      if (wanted || !w->isV4()) return error(req, 400, "requested address " + text + ": this node has no pod CIDR of that family");
      if (!cidr_.contains(*w) || *w == cidr_.at(0) || *w == cidr_.at(1) || *w == cidr_.at(2) ||
          *w == cidr_.at(cidr_.size() - 1))
        return error(req, 400, "requested address " + text + " is not an assignable address of this node's pod CIDR " + cidr_.str());
      wanted = *w;
    }
    IpAddress ip;
    if (r.kind() == av1::MANAGEMENT) {
      ip = cidr_.at(2);
    } else if (wanted) {
      if (used_.count(*wanted)) {
        for (const auto& [id, a] : attachments_)
          for (const auto& x : a.ips())
            if (x.address().rfind(wanted->str() + "/", 0) == 0)
              return error(req, 409, "requested address " + wanted->str() + " is held by attachment " + id + "; detach it first", id);
      }
      ip = *wanted;
    } else {
      auto got = allocate();
      if (!got) return error(req, 507, "the pod CIDR " + cidr_.str() + " is exhausted");
      ip = *got;
    }
    used_.insert(ip);
    av1::Attachment a;
    a.set_id(randomId());
    a.set_kind(r.kind());
    *a.mutable_pod() = r.pod();
    a.set_sandbox_id(r.sandbox_id());
    a.set_ifname(r.ifname());
    a.set_pf_index(r.pf_index());
    a.set_vf_index(r.vf_index());
    a.set_mac(r.requested_mac().empty() ? MacAddress::fromIp(ip).str() : requested.str());
    auto* assignment = a.add_ips();
    assignment->set_address(ip.str() + "/" + std::to_string(cidr_.length));
    assignment->set_gateway(cidr_.at(1).str());
    // A pod routes everything via the gateway; the management port only the
    // cluster and service CIDRs (the host keeps its own default route).
    std::vector<std::string> dsts = {ip.isV4() ? "0.0.0.0/0" : "::/0"};
    if (r.kind() == av1::MANAGEMENT) dsts = {opt_.cluster_cidr, opt_.service_cidr};
    for (const auto& dst : dsts) {
      auto* route = a.add_routes();
      route->set_dst(dst);
      route->set_gw(cidr_.at(1).str());
    }
    a.set_mtu(r.requested_mtu() ? r.requested_mtu() : opt_.mtu);
    if (answer_mtu_) {
      a.set_mtu(answer_mtu_);
      answer_mtu_ = 0;
    }
    a.set_representor("pf" + std::to_string(r.pf_index()) + "vf" + std::to_string(r.vf_index()));
    attachments_[a.id()] = a;
    av1::AttachResponse resp;
    *resp.mutable_attachment() = a;
    resp.set_boot_id(boot_id_);
    reply(req, 200, resp);
  }

  void detachBody(http::http_request& req) {
    av1::DetachRequest d;
    std::string why;
    if (!parseBody(req, d, why)) return error(req, 400, why);
    detach(req, d);
  }

  void detach(http::http_request& req, const av1::DetachRequest& d) {
    int selectors = !d.id().empty() + d.by_vf() + (!d.sandbox_id().empty() || !d.ifname().empty());
    if (selectors != 1)
      return error(req, 400, "give exactly one of: id; by_vf with pf_index and vf_index; sandbox_id with ifname");
    if (d.id().empty() && !d.by_vf() && (d.sandbox_id().empty() || d.ifname().empty()))
      return error(req, 400, "detaching by sandbox needs both sandbox_id and ifname");
    std::lock_guard lk(mu_);
    bool found = false;
    for (auto it = attachments_.begin(); it != attachments_.end();) {
      const auto& a = it->second;
      bool match = (!d.id().empty() && a.id() == d.id()) ||
                   (d.by_vf() && a.pf_index() == d.pf_index() && a.vf_index() == d.vf_index()) ||
                   (d.id().empty() && !d.by_vf() && a.kind() == av1::POD && a.sandbox_id() == d.sandbox_id() &&
                    a.ifname() == d.ifname());
      if (match) {
        for (const auto& ip : a.ips())
          if (auto p = IpInterfaceAddress::parse(ip.address())) used_.erase(p->address);
        it = attachments_.erase(it);
        found = true;
      } else {
        ++it;
      }
    }
    av1::DetachResponse resp;
    resp.set_found(found);
    resp.set_boot_id(boot_id_);
    reply(req, 200, resp);
  }

  void testControl(http::http_request& req, const std::string& path,
                   std::map<utility::string_t, utility::string_t>& q) {
    auto num = [&](const char* key, long fallback) {
      auto it = q.find(U(key));
      return it == q.end() ? fallback : std::stol(it->second);
    };
    std::lock_guard lk(mu_);
    if (path == "/test/reboot") {
      if (auto it = q.find(U("cidr")); it != q.end()) {
        auto p = IpPrefix::parse(http::uri::decode(it->second));
        if (!p || !p->address.isV4()) {
          req.reply(400, "cidr: an IPv4 prefix\n").wait();
          return;
        }
        cidr_ = *p;
      }
      boot_id_ = randomId();
      attachments_.clear();
      used_.clear();
      next_ = 0;
      unhealthy_ = false;
    } else if (path == "/test/down") {
      down_until_ = Clock::now() + std::chrono::seconds(num("seconds", 5));
      auto it = q.find(U("mode"));
      down_mode_ = it == q.end() ? "hang" : it->second;
    } else if (path == "/test/up") {
      down_until_ = {};
    } else if (path == "/test/unhealthy") {
      unhealthy_ = num("on", 1) != 0;
    } else if (path == "/test/answer-mtu") {
      answer_mtu_ = static_cast<uint32_t>(num("mtu", 0));
    } else if (path == "/test/fail") {
      fail_count_ = static_cast<int>(num("count", 1));
      fail_status_ = static_cast<unsigned>(num("status", 500));
    } else {
      req.reply(404, "unknown test control " + path).wait();
      return;
    }
    req.reply(200, "ok\n").wait();
  }

  Options opt_;
  IpPrefix cidr_;
  std::mutex mu_;
  std::string boot_id_;
  std::map<std::string, av1::Attachment> attachments_;
  std::set<IpAddress> used_;
  uint64_t next_ = 0;
  bool unhealthy_ = false;
  Clock::time_point down_until_{};
  std::string down_mode_ = "hang";
  int fail_count_ = 0;
  uint32_t answer_mtu_ = 0;
  unsigned fail_status_ = 500;
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
      o.pod_cidr = next();
    else if (a == "--vfs")
      o.vfs = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--mtu")
      o.mtu = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--node-name")
      o.node_name = next();
    else if (a == "--cluster-cidr")
      o.cluster_cidr = next();
    else if (a == "--service-cidr")
      o.service_cidr = next();
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
  try {
    FakeDpu dpu(o);
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
        req.reply(500, std::string("fake_dpu_api: ") + e.what()).wait();
      }
    });
    listener.open().wait();
    std::fprintf(stderr, "fake_dpu_api: listening on %s, pod CIDR %s\n", o.listen.c_str(), o.pod_cidr.c_str());
    int sig = 0;
    sigwait(&sigs, &sig);
    listener.close().wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_dpu_api: %s\n", e.what());
    return 1;
  }
  return 0;
}
