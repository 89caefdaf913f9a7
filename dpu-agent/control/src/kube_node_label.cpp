// Reads one label of one Node (see kube_node_label.h).
#include "control/kube_node_label.h"

#include <boost/asio/ssl.hpp>
#include <cpprest/http_client.h>
#include <nlohmann/json.hpp>

namespace dpu::control {

Result<std::string> readNodeLabel(const KubeConnection& conn, const std::string& node, const std::string& label,
                                  std::chrono::seconds timeout) {
  namespace http = web::http;
  std::string what = "reading label " + label + " of Node " + node + " from " + conn.server;
  try {
    http::client::http_client_config cfg;
    cfg.set_timeout(timeout);
    cfg.set_validate_certificates(!conn.insecure_skip_tls_verify);
    std::string ca = conn.ca_pem, cert = conn.client_cert_pem, key = conn.client_key_pem;
    cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
      if (!ca.empty()) ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()));
      if (!cert.empty()) {
        ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
        ctx.use_private_key(boost::asio::buffer(key.data(), key.size()), boost::asio::ssl::context::pem);
      }
    });
    http::client::http_client client(web::uri(conn.server), cfg);
    http::http_request req(http::methods::GET);
    req.set_request_uri(web::uri("/api/v1/nodes/" + web::uri::encode_data_string(node)));
    KubeTokenSource tokens(conn, std::chrono::seconds(60));
    std::string token = tokens.token();
    if (!token.empty()) req.headers().add(http::header_names::authorization, "Bearer " + token);
    req.headers().add(http::header_names::accept, "application/json");
    auto resp = client.request(req).get();
    std::string body = resp.extract_utf8string(true).get();
    int code = resp.status_code();
    if (code == 404) return Error{what + ": the API server has no Node " + node + " (check the node name)", ErrorCode::kNotFound};
    if (code == 401 || code == 403)
      return Error{what + ": refused (" + std::to_string(code) + "): " + body + "; the agent needs get on nodes",
                   ErrorCode::kForbidden};
    if (code != 200) return Error{what + ": HTTP " + std::to_string(code) + ": " + body, ErrorCode::kUnavailable};
    auto j = nlohmann::json::parse(body, nullptr, false);
    const nlohmann::json::json_pointer p("/metadata/labels");
    if (j.is_discarded() || !j.contains(p) || !j[p].is_object() || !j[p].contains(label) || !j[p][label].is_string() ||
        j[p][label].get<std::string>().empty())
      return Error{what + ": the Node has no label " + label + "; pair the DPU with its host: kubectl label node " +
                       node + " " + label + "=<host node name>",
                   ErrorCode::kNotFound};
    return j[p][label].get<std::string>();
  } catch (const std::exception& e) {
    return Error{what + ": " + e.what(), ErrorCode::kUnavailable};
  }
}

}  // namespace dpu::control
