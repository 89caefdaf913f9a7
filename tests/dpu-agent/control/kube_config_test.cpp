// kubeconfig and in-cluster configuration: the current context's server, CA,
// user; inline (-data) and file forms; refusals that name the field; the
// service-account token re-read when it rotates.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "control/kube_config.h"

using namespace dpu::control;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kube_config_test." + std::to_string(getpid()) + "." +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: lab
contexts:
- name: lab
  context: {cluster: lab-cluster, user: agent}
- name: other
  context: {cluster: other-cluster, user: certs}
clusters:
- name: lab-cluster
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
- name: other-cluster
  cluster:
    server: https://other:443
    certificate-authority: ca.pem
    insecure-skip-tls-verify: true
users:
- name: agent
  user: {token: abc123}
- name: certs
  user:
    client-certificate: client.pem
    client-key-data: S0VZ
)";

}  // namespace

TEST_CASE("kubeconfig: the current context's server, inline CA and token", "[kube]") {
  auto k = parseKubeconfig(kKubeconfig, "/nonexistent");
  REQUIRE(k.ok());
  CHECK(k->server == "https://10.0.0.1:6443");
  CHECK(k->ca_pem == "-----BEGIN CERTIFICATE-----\n");
  CHECK(k->token == "abc123");
  CHECK_FALSE(k->insecure_skip_tls_verify);
}

TEST_CASE("kubeconfig: another context, files relative to the kubeconfig, client certificates", "[kube]") {
  TempDir dir;
  dir.write("ca.pem", "CA");
  dir.write("client.pem", "CERT");
  std::string path = dir.write("config", kKubeconfig);
  auto k = loadKubeconfig(path, "other");
  REQUIRE(k.ok());
  CHECK(k->server == "https://other:443");
  CHECK(k->ca_pem == "CA");
  CHECK(k->insecure_skip_tls_verify);
  CHECK(k->client_cert_pem == "CERT");
  CHECK(k->client_key_pem == "KEY");
  CHECK(k->token.empty());
}

TEST_CASE("kubeconfig: refusals name what to fix", "[kube]") {
  auto missing = loadKubeconfig("/nonexistent/kubeconfig");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error(), Catch::Contains("/nonexistent/kubeconfig"));

  auto no_ctx = parseKubeconfig(kKubeconfig, ".", "nope");
  REQUIRE_FALSE(no_ctx.ok());
  CHECK_THAT(no_ctx.error(), Catch::Contains("context 'nope'"));

  std::string exec = R"(current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://k"}}]
users: [{name: u, user: {exec: {command: aws}}}])";
  auto e = parseKubeconfig(exec, ".");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error(), Catch::Contains("exec is not supported"));

  std::string bad_server = R"(current-context: c
contexts: [{name: c, context: {cluster: k}}]
clusters: [{name: k, cluster: {server: "ftp://k"}}])";
  auto s = parseKubeconfig(bad_server, ".");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("not an http:// or https:// URL"));

  std::string bad_b64 = R"(current-context: c
contexts: [{name: c, context: {cluster: k}}]
clusters: [{name: k, cluster: {server: "https://k", certificate-authority-data: "!!!"}}])";
  auto b = parseKubeconfig(bad_b64, ".");
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.error(), Catch::Contains("certificate-authority-data is not valid base64"));

  CHECK_FALSE(parseKubeconfig("current-context: x", ".").ok());
  CHECK_FALSE(parseKubeconfig("[1, 2]", ".").ok());
}

TEST_CASE("in-cluster config: the service account directory and the server", "[kube]") {
  TempDir dir;
  dir.write("token", "tok-1\n");
  dir.write("ca.crt", "CA");
  dir.write("namespace", "dpu-system\n");
  auto k = loadInClusterConfig(dir.path.string(), "https://127.0.0.1:6443");
  REQUIRE(k.ok());
  CHECK(k->server == "https://127.0.0.1:6443");
  CHECK(k->ca_pem == "CA");
  CHECK(k->ns == "dpu-system");
  CHECK(k->token_file == (dir.path / "token").string());

  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto env = loadInClusterConfig(dir.path.string());
  REQUIRE(env.ok());
  CHECK(env->server == "https://[fd00::1]:443");
  unsetenv("KUBERNETES_SERVICE_HOST");
  auto unset = loadInClusterConfig(dir.path.string());
  REQUIRE_FALSE(unset.ok());
  CHECK_THAT(unset.error(), Catch::Contains("KUBERNETES_SERVICE_HOST"));
  unsetenv("KUBERNETES_SERVICE_PORT");

  auto no_token = loadInClusterConfig((dir.path / "missing").string(), "https://x");
  REQUIRE_FALSE(no_token.ok());
  CHECK_THAT(no_token.error(), Catch::Contains("token"));
}

TEST_CASE("token source: a rotated token file is picked up", "[kube]") {
  TempDir dir;
  std::string file = dir.write("token", "first\n");
  KubeConnection c;
  c.token_file = file;
  KubeTokenSource tokens(c, std::chrono::seconds(60));
  CHECK(tokens.token() == "first");
  // The kubelet rewrites the file: a new mtime is noticed at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.write("token", "second\n");
  CHECK(tokens.token() == "second");
  // A vanished file keeps the last good token and reports the error.
  fs::remove(file);
  tokens.invalidate();
  std::string err;
  CHECK(tokens.token(&err) == "second");
  CHECK_FALSE(err.empty());

  KubeConnection s;
  s.token = "static";
  KubeTokenSource fixed(s, std::chrono::seconds(60));
  CHECK(fixed.token() == "static");
}
