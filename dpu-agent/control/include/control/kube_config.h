// How to reach the Kubernetes API server: from a kubeconfig file (the
// current-context's cluster and user) or from the in-cluster service account
// (KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/
// serviceaccount/{token,ca.crt,namespace}). Only what an agent needs is
// supported: a server URL, a CA (file or inline), TLS verification on or off,
// a bearer token (inline or from a file that is re-read when it rotates), and
// client certificates. exec and auth-provider plugins are refused with a
// message, never ignored.
#pragma once

#include <chrono>
#include <ctime>
#include <mutex>
#include <string>

#include "common/result.h"

namespace dpu::control {

struct KubeConnection {
  std::string server;             // "https://10.96.0.1:443"
  std::string ca_pem;             // empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string token;              // static bearer token
  std::string token_file;         // re-read on rotation; wins over `token`
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string ns;                 // the service account's namespace, when known
  std::string origin;             // "kubeconfig /path, context x" / "in-cluster /dir", for messages
};

// Reads a kubeconfig (YAML or JSON). `context` empty: current-context.
Result<KubeConnection> loadKubeconfig(const std::string& path, const std::string& context = "");
// The same from text; relative file paths resolve against `base_dir`.
Result<KubeConnection> parseKubeconfig(std::string_view text, const std::string& base_dir,
                                       const std::string& context = "", const std::string& origin = "kubeconfig");

// In-cluster: `dir` holds token, ca.crt and (optionally) namespace. The server
// is `server_override` when given, else https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
Result<KubeConnection> loadInClusterConfig(const std::string& dir, const std::string& server_override = "");

// The bearer token of a connection, re-read from token_file when the file's
// mtime changed or `reread_every` passed (service-account tokens are rotated by
// the kubelet; a stale one gets 401). Thread-safe.
class KubeTokenSource {
 public:
  KubeTokenSource(const KubeConnection& connection, std::chrono::seconds reread_every);
  // The current token; empty when there is none. On a read error the last good
  // token is kept and the error is returned through `error`.
  std::string token(std::string* error = nullptr);
  // Forget the cached token (after a 401) so the next call reads the file.
  void invalidate();

 private:
  std::mutex mutex_;
  std::string static_token_;
  std::string file_;
  std::chrono::seconds reread_every_;
  std::string cached_;
  struct timespec mtime_ {};
  std::chrono::steady_clock::time_point read_at_{};
  bool have_ = false;
};

}  // namespace dpu::control
