// The cpprestsdk shell around the ApiRouter (see api_server.h).
#include "control/api_server.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>

#include <boost/asio/ssl.hpp>
#include <cpprest/http_listener.h>
#include <openssl/x509v3.h>

#include "common/atomic_file.h"
#include "common/log.h"

namespace dpu::control {
namespace {

using web::http::http_request;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

constexpr const char* kLog = "api";

// The names a client certificate gives itself: its subject CNs and DNS subjectAltNames.
struct CertNames {
  std::vector<std::string> cn;
  std::vector<std::string> dns;
  std::string text() const {
    std::string t;
    for (const auto& n : cn) t += (t.empty() ? "" : ", ") + ("CN=" + n);
    for (const auto& n : dns) t += (t.empty() ? "" : ", ") + ("DNS:" + n);
    return t.empty() ? "no CN and no DNS subjectAltName" : t;
  }
};

CertNames certNames(X509* cert) {
  CertNames out;
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = -1; subject && (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
    unsigned char* utf8 = nullptr;
    int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
    if (n < 0) continue;
    out.cn.emplace_back(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n));
    OPENSSL_free(utf8);
  }
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
    if (g->type != GEN_DNS) continue;
    out.dns.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName)),
                         static_cast<size_t>(ASN1_STRING_length(g->d.dNSName)));
  }
  GENERAL_NAMES_free(sans);
  return out;
}

bool sameName(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

// With a client CA, the client must present a certificate the CA signed; with
// `client_node` set (the attach API) that certificate must also name the host
// node this agent serves, in its CN or a DNS subjectAltName, so a host cannot
// act for another node's pods with its own node's certificate. Another name
// fails the handshake, and the log says which name was expected and which came.
void configureTls(boost::asio::ssl::context& ctx, const TlsConfig& tls, const std::string& client_node) {
  ctx.set_options(boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
                  boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
                  boost::asio::ssl::context::no_tlsv1_1);
  ctx.use_certificate_chain_file(tls.cert_file);
  ctx.use_private_key_file(tls.key_file, boost::asio::ssl::context::pem);
  if (tls.client_ca_file.empty()) return;
  ctx.load_verify_file(tls.client_ca_file);
  ctx.set_verify_mode(boost::asio::ssl::verify_peer | boost::asio::ssl::verify_fail_if_no_peer_cert);
  if (client_node.empty()) return;
  ctx.set_verify_callback([client_node](bool preverified, boost::asio::ssl::verify_context& vc) {
    if (!preverified) return false;  // not signed by the client CA: OpenSSL says why
    X509_STORE_CTX* store = vc.native_handle();
    if (X509_STORE_CTX_get_error_depth(store) > 0) return true;  // a CA of the chain, not the client
    X509* cert = X509_STORE_CTX_get_current_cert(store);
    if (!cert) return false;
    CertNames names = certNames(cert);
    for (const auto* list : {&names.cn, &names.dns}) {
      for (const auto& n : *list) {
        if (sameName(n, client_node)) return true;
      }
    }
    DPU_LOG(kWarn, kLog) << "refused a client certificate: expected one naming the host node '" << client_node
                         << "' (CN or DNS subjectAltName), it presented " << names.text()
                         << "; issue the host's certificate for its node name";
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return false;
  });
}

// `close`: the connection ends after the answer (the rest of a refused body is never read).
void reply(http_request& req, const ApiAnswer& a, bool close = false) {
  web::http::http_response resp(a.status);
  resp.set_body(std::vector<unsigned char>(a.body.begin(), a.body.end()));
  resp.headers().set_content_type(a.content_type);
  if (close) resp.headers().add("Connection", "close");
  req.reply(resp).then([](pplx::task<void> t) {
    try {
      t.get();
    } catch (const std::exception& e) {
      DPU_LOG(kDebug, kLog) << "reply not delivered: " << e.what();
    }
  });
}

std::string bodyLimitMessage(const std::string& how) {
  return "the request body" + how + " is larger than the limit of " + std::to_string(kMaxBodyBytes) +
         " bytes; the connection is closed without reading the rest";
}

// Stops the listener reading a body: its next write into the body buffer fails,
// which ends its read loop, and the answer goes out as soon as it has stopped.
void stopReadingBody(http_request& req) {
  req.body().streambuf().close(std::ios_base::out,
                               std::make_exception_ptr(std::length_error("request body over the limit")));
}

// Reads the body as the listener receives it, whatever its transfer encoding,
// into `out`; false as soon as the running total passes kMaxBodyBytes (the
// listener reads one chunk of a chunked body ahead of this).
pplx::task<bool> readBodyLimited(http_request req, std::shared_ptr<std::string> out) {
  auto buf = std::make_shared<std::array<uint8_t, 4096>>();
  return req.body().streambuf().getn(buf->data(), buf->size()).then([req, out, buf](size_t n) -> pplx::task<bool> {
    if (n == 0) {
      // The end of the body, or of the connection: content_ready() says which.
      return req.content_ready().then([](http_request) { return true; });
    }
    if (out->size() + n > kMaxBodyBytes) return pplx::task_from_result(false);
    out->append(reinterpret_cast<const char*>(buf->data()), n);
    return readBodyLimited(req, out);
  });
}

}  // namespace

ApiServer::ApiServer(ApiRouter& router, std::string uri, TlsConfig tls, Scope scope, std::string client_node)
    : router_(router), uri_(std::move(uri)), tls_(std::move(tls)), scope_(scope), client_node_(std::move(client_node)) {}

ApiServer::~ApiServer() { stop(); }

Result<void> ApiServer::start() {
  http_listener_config cfg;
  cfg.set_timeout(utility::seconds(30));
  if (tls_.enabled()) {
    for (const auto* f : {&tls_.cert_file, &tls_.key_file, &tls_.client_ca_file}) {
      if (!f->empty() && !fileExists(*f)) return Error{"TLS file " + *f + " does not exist (config api.tls)"};
    }
    if (!tls_.client_ca_file.empty() && scope_ == Scope::kAll && client_node_.empty()) {
      return Error{"api.tls.clientCA is set but the node name is not known: client certificates are checked against "
                   "it (set nodeName)"};
    }
    // Load once here so a bad certificate fails the start, not the first handshake.
    try {
      boost::asio::ssl::context probe(boost::asio::ssl::context::tls_server);
      configureTls(probe, tls_, client_node_);
    } catch (const std::exception& e) {
      return Error{std::string("cannot load the API's TLS files (config api.tls): ") + e.what()};
    }
    TlsConfig tls = tls_;
    std::string node = client_node_;
    cfg.set_ssl_context_callback([tls, node](boost::asio::ssl::context& ctx) { configureTls(ctx, tls, node); });
  }
  try {
    listener_ = std::make_unique<http_listener>(utility::conversions::to_string_t(uri_), cfg);
    ApiRouter* router = &router_;
    bool metrics_only = scope_ == Scope::kMetricsOnly;
    listener_->support([router, metrics_only](http_request req) {
      try {
        ApiRequest r;
        r.method = req.method();
        r.path = web::uri::decode(req.relative_uri().path());
        if (metrics_only && r.path != "/metrics" && r.path != "/healthz" && r.path != "/readyz") {
          reply(req, ApiAnswer{404, "text/plain", "this listener serves only /metrics, /healthz and /readyz\n"});
          return;
        }
        r.content_type = req.headers().content_type();
        if (req.headers().has("Accept")) r.accept = req.headers()["Accept"];
        // A declared length over the limit is refused before reading any of it.
        if (req.headers().content_length() > kMaxBodyBytes) {
          stopReadingBody(req);
          reply(req,
                router->refuse(r, 413, bodyLimitMessage(" of " + std::to_string(req.headers().content_length()) + " bytes")),
                true);
          return;
        }
        auto body = std::make_shared<std::string>();
        readBodyLimited(req, body).then([router, req, r, body](pplx::task<bool> t) mutable {
          bool whole = false;
          try {
            whole = t.get();
          } catch (const std::exception& e) {
            DPU_LOG(kDebug, kLog) << "request body not read: " << e.what();
            reply(req, router->refuse(r, 400, "cannot read the request body: it ended before its declared end"), true);
            return;
          }
          if (!whole) {
            stopReadingBody(req);
            reply(req, router->refuse(r, 413, bodyLimitMessage("")), true);
            return;
          }
          r.body = std::move(*body);
          reply(req, router->handle(r));
        });
      } catch (const std::exception& e) {
        DPU_LOG(kWarn, kLog) << "bad request: " << e.what();
        try {
          req.reply(400, "bad request\n");
        } catch (...) {
        }
      }
    });
    listener_->open().wait();
  } catch (const std::exception& e) {
    listener_.reset();
    return Error{"cannot listen on " + uri_ +
                 (metrics_only() ? " (config metrics.listen): " : " (config api.address/api.port): ") + e.what()};
  }
  DPU_LOG(kInfo, kLog) << (metrics_only() ? "metrics listening on " : "attach API listening on ") << uri_
                       << (tls_.client_ca_file.empty() ? "" : " (client certificates required)");
  return {};
}

void ApiServer::stop() {
  if (!listener_) return;
  try {
    listener_->close().wait();
  } catch (const std::exception& e) {
    DPU_LOG(kWarn, kLog) << "closing the listener: " << e.what();
  }
  listener_.reset();
}

}  // namespace dpu::control
