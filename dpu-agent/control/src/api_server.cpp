// The cpprestsdk shell around the ApiRouter (see api_server.h).
#include "control/api_server.h"

#include <boost/asio/ssl.hpp>
#include <cpprest/http_listener.h>

#include "common/atomic_file.h"
#include "common/log.h"

namespace dpu::control {
namespace {

using web::http::http_request;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

constexpr const char* kLog = "api";

void configureTls(boost::asio::ssl::context& ctx, const TlsConfig& tls) {
  ctx.set_options(boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
                  boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
                  boost::asio::ssl::context::no_tlsv1_1);
  ctx.use_certificate_chain_file(tls.cert_file);
  ctx.use_private_key_file(tls.key_file, boost::asio::ssl::context::pem);
  if (!tls.client_ca_file.empty()) {
    ctx.load_verify_file(tls.client_ca_file);
    ctx.set_verify_mode(boost::asio::ssl::verify_peer | boost::asio::ssl::verify_fail_if_no_peer_cert);
  }
}

void reply(http_request& req, const ApiAnswer& a) {
  web::http::http_response resp(a.status);
  resp.headers().set_content_type(a.content_type);
  resp.set_body(std::vector<unsigned char>(a.body.begin(), a.body.end()));
  resp.headers().set_content_type(a.content_type);
  req.reply(resp).then([](pplx::task<void> t) {
    try {
      t.get();
    } catch (const std::exception& e) {
      DPU_LOG(kDebug, kLog) << "reply not delivered: " << e.what();
    }
  });
}

}  // namespace

ApiServer::ApiServer(ApiRouter& router, std::string uri, TlsConfig tls)
    : router_(router), uri_(std::move(uri)), tls_(std::move(tls)) {}

ApiServer::~ApiServer() { stop(); }

Result<void> ApiServer::start() {
  http_listener_config cfg;
  cfg.set_timeout(utility::seconds(30));
  if (tls_.enabled()) {
    for (const auto* f : {&tls_.cert_file, &tls_.key_file, &tls_.client_ca_file}) {
      if (!f->empty() && !fileExists(*f)) return Error{"TLS file " + *f + " does not exist (config api.tls)"};
    }
    // Load once here so a bad certificate fails the start, not the first handshake.
    try {
      boost::asio::ssl::context probe(boost::asio::ssl::context::tls_server);
      configureTls(probe, tls_);
    } catch (const std::exception& e) {
      return Error{std::string("cannot load the API's TLS files (config api.tls): ") + e.what()};
    }
    TlsConfig tls = tls_;
    cfg.set_ssl_context_callback([tls](boost::asio::ssl::context& ctx) { configureTls(ctx, tls); });
  }
  try {
    listener_ = std::make_unique<http_listener>(utility::conversions::to_string_t(uri_), cfg);
    ApiRouter* router = &router_;
    listener_->support([router](http_request req) {
      try {
        ApiRequest r;
        r.method = req.method();
        r.path = web::uri::decode(req.relative_uri().path());
        r.content_type = req.headers().content_type();
        if (req.headers().has("Accept")) r.accept = req.headers()["Accept"];
        // Refuse an oversized body before reading it.
        if (req.headers().content_length() > kMaxBodyBytes) {
          r.body.assign(kMaxBodyBytes + 1, '\0');
          reply(req, router->handle(r));
          return;
        }
        req.extract_vector().then([router, req, r](pplx::task<std::vector<unsigned char>> t) mutable {
          try {
            auto bytes = t.get();
            r.body.assign(bytes.begin(), bytes.end());
          } catch (const std::exception& e) {
            ApiAnswer a{400, kJsonType, std::string("{\"httpStatus\":400,\"message\":\"cannot read the request body\"}\n")};
            reply(req, a);
            return;
          }
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
    return Error{"cannot listen on " + uri_ + " (config api.address/api.port): " + e.what()};
  }
  DPU_LOG(kInfo, kLog) << "attach API listening on " << uri_
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
