// The Kubernetes ClusterSource (see kube_source.h), put together from its
// parts: one Transport (kube_transport.h) shared by a Reflector per kind
// (kube_reflector.h), a Dispatcher (kube_dispatcher.h) that alone calls the
// listener, and the NodePublisher (kube_node_publisher.h) for publishSelf().
#include "control/kube_source.h"

#include <boost/asio/ssl.hpp>

#include "common/log.h"
#include "kube_dispatcher.h"
#include "kube_node_publisher.h"
#include "kube_reflector.h"
#include "kube_transport.h"

namespace dpu::control {
namespace {

using kube::Dispatcher;
using kube::NodePublisher;
using kube::Reflector;
using kube::ReflectorOptions;
using kube::Transport;

class KubeSource final : public ClusterSource {
 public:
  KubeSource(KubeSourceConfig config, const KubeConnection& connection)
      : config_(std::move(config)),
        transport_(connection, config_.request_timeout, config_.watch_timeout, config_.token_reread, errors_),
        publisher_(transport_, config_.node_name) {}

  ~KubeSource() override { stop(); }

  Result<void> start(ClusterListener& listener) override {
    std::lock_guard<std::mutex> lock(lifecycle_);
    if (dispatcher_) return Error{"the Kubernetes source is already started"};
    dispatcher_ = std::make_unique<Dispatcher>(listener, config_.resources, config_.max_pending);
    for (ObjectKind kind : config_.resources) {
      ReflectorOptions o;
      o.kind = kind;
      o.page_size = config_.page_size;
      o.backoff_initial = config_.backoff_initial;
      o.backoff_max = config_.backoff_max;
      o.watch_timeout = config_.watch_timeout;
      o.relist_period = config_.relist_period;
      reflectors_.push_back(std::make_unique<Reflector>(o, transport_, *dispatcher_, stop_, errors_));
    }
    dispatcher_->start();
    for (auto& r : reflectors_) r->start();
    DPU_LOG(kInfo, "kube") << "syncing from " << transport_.server() << " (" << transport_.origin() << ")";
    return {};
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(lifecycle_);
    if (!dispatcher_ || stop_.stopping()) return;
    stop_.stop();
    transport_.cancel();
    dispatcher_->stop();  // also frees reflectors waiting for queue space
    for (auto& r : reflectors_) r->join();
  }

  Result<void> publishSelf(const SelfEntry& self) override { return publisher_.publish(self); }

  ClusterSourceStats stats() const override {
    ClusterSourceStats s;
    std::lock_guard<std::mutex> lock(lifecycle_);
    for (const auto& r : reflectors_) {
      s.malformed += r->malformed();
      s.watch_restarts += r->watchRestarts();
      s.relists += r->relists();
      s.relists_by_kind[static_cast<size_t>(r->kind())] += r->relists();
    }
    if (dispatcher_) {
      s.events = dispatcher_->events();
      s.events_by_kind = dispatcher_->eventsByKind();
      s.synced = dispatcher_->synced();
    }
    s.last_error = errors_.get();
    return s;
  }

  std::string kind() const override { return "kubernetes"; }

 private:
  const KubeSourceConfig config_;
  kube::LastError errors_;
  kube::StopSignal stop_;
  Transport transport_;
  NodePublisher publisher_;
  mutable std::mutex lifecycle_;
  std::unique_ptr<Dispatcher> dispatcher_;           // from start()
  std::vector<std::unique_ptr<Reflector>> reflectors_;  // one per resource
};

Result<void> checkConfig(const KubeSourceConfig& c) {
  if (c.resources.empty()) return Error{"kubernetes source: resources is empty; list at least one resource to watch"};
  if (c.page_size < 1 || c.page_size > 10000)
    return Error{"kubernetes source: page_size " + std::to_string(c.page_size) + " is outside 1..10000"};
  if (c.backoff_initial.count() <= 0 || c.backoff_max < c.backoff_initial)
    return Error{"kubernetes source: backoff_initial must be positive and not above backoff_max"};
  if (c.watch_timeout.count() < 1) return Error{"kubernetes source: watch_timeout must be at least 1 s"};
  if (c.request_timeout.count() < 1) return Error{"kubernetes source: request_timeout must be at least 1 s"};
  if (c.max_pending < 1) return Error{"kubernetes source: max_pending must be at least 1"};
  if (c.relist_period.count() < 0) return Error{"kubernetes source: relist_period must not be negative"};
  return {};
}

}  // namespace

Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config,
                                                            const KubeConnection& connection) {
  if (auto ok = checkConfig(config); !ok) return std::move(ok).takeError();
  if (connection.server.rfind("https://", 0) != 0 && connection.server.rfind("http://", 0) != 0)
    return Error{connection.origin + ": server '" + connection.server + "' is not an http:// or https:// URL"};
  // Refuse bad PEM now rather than on every request.
  try {
    boost::asio::ssl::context ctx(boost::asio::ssl::context::tls_client);
    if (!connection.ca_pem.empty())
      ctx.add_certificate_authority(boost::asio::buffer(connection.ca_pem.data(), connection.ca_pem.size()));
    if (!connection.client_cert_pem.empty()) {
      ctx.use_certificate_chain(boost::asio::buffer(connection.client_cert_pem.data(), connection.client_cert_pem.size()));
      ctx.use_private_key(boost::asio::buffer(connection.client_key_pem.data(), connection.client_key_pem.size()),
                          boost::asio::ssl::context::pem);
    }
  } catch (const std::exception& e) {
    return Error{connection.origin + ": the CA or client certificate/key is not valid PEM (" + e.what() + ")"};
  }
  try {
    return std::unique_ptr<ClusterSource>(std::make_unique<KubeSource>(config, connection));
  } catch (const std::exception& e) {
    return Error{"creating the Kubernetes client for " + connection.server + ": " + e.what()};
  }
}

Result<std::unique_ptr<ClusterSource>> makeKubernetesSource(const KubeSourceConfig& config) {
  auto conn = config.kubeconfig.empty() ? loadInClusterConfig(config.in_cluster_dir, config.api_server)
                                        : loadKubeconfig(config.kubeconfig, config.kube_context);
  if (!conn.ok()) return std::move(conn).takeError();
  return makeKubernetesSource(config, *conn);
}

}  // namespace dpu::control
