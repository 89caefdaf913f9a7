// The Kubernetes source's listener thread (see kube_dispatcher.h).
#include "kube_dispatcher.h"

namespace dpu::control::kube {

Dispatcher::Dispatcher(ClusterListener& listener, const std::vector<ObjectKind>& kinds, size_t max_pending)
    : listener_(listener), max_pending_(max_pending) {
  for (ObjectKind k : kinds) all_mask_ |= 1u << static_cast<unsigned>(k);
}

void Dispatcher::start() { thread_ = std::thread([this] { run(); }); }

void Dispatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_cv_.notify_all();
    space_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::array<uint64_t, kObjectKindCount> Dispatcher::eventsByKind() const {
  std::array<uint64_t, kObjectKindCount> out{};
  for (size_t i = 0; i < kObjectKindCount; ++i) out[i] = events_by_kind_[i].load();
  return out;
}

void Dispatcher::enqueue(std::vector<Delivery>& batch) {
  if (batch.empty()) return;
  std::unique_lock<std::mutex> lock(mu_);
  space_cv_.wait(lock, [&] { return stopping_ || queue_.size() < max_pending_; });
  for (auto& d : batch) queue_.push_back(std::move(d));
  batch.clear();
  queue_cv_.notify_one();
}

void Dispatcher::enqueueOne(Delivery&& d) {
  std::vector<Delivery> one;
  one.push_back(std::move(d));
  enqueue(one);
}

void Dispatcher::run() {
  std::vector<Delivery> work;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      size_t n = std::min<size_t>(queue_.size(), 1024);
      for (size_t i = 0; i < n; ++i) {
        work.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      space_cv_.notify_all();
    }
    for (auto& d : work) {
      if (stopping_.load()) return;
      deliver(d);
    }
    work.clear();
  }
}

void Dispatcher::deliver(Delivery& d) {
  ClusterListener& l = listener_;
  const KubeObject& o = d.object;
  if (d.op == Delivery::Op::kListed) {
    listed_ |= 1u << static_cast<unsigned>(d.kind);
    if ((listed_ & all_mask_) == all_mask_) {
      synced_ = true;
      l.synced();
    }
    return;
  }
  events_++;
  events_by_kind_[static_cast<size_t>(d.kind)]++;
  if (d.op == Delivery::Op::kDelete) {
    switch (d.kind) {
      case ObjectKind::kNode: l.nodeDeleted(o.name); break;
      case ObjectKind::kPod: l.podDeleted(o.ns, o.name); break;
      case ObjectKind::kService: l.serviceDeleted(o.ns, o.name); break;
      case ObjectKind::kEndpointSlice: l.endpointSliceDeleted(o.ns, o.name); break;
      case ObjectKind::kNetworkPolicy: l.networkPolicyDeleted(o.ns, o.name); break;
      case ObjectKind::kNamespace: l.namespaceDeleted(o.name); break;
    }
    return;
  }
  switch (d.kind) {
    case ObjectKind::kNode: l.nodeUpserted(std::get<NodeInfo>(o.info)); break;
    case ObjectKind::kPod: l.podUpserted(std::get<PodInfo>(o.info)); break;
    case ObjectKind::kService: l.serviceUpserted(std::get<ServiceInfo>(o.info)); break;
    case ObjectKind::kEndpointSlice: l.endpointSliceUpserted(std::get<EndpointSliceInfo>(o.info)); break;
    case ObjectKind::kNetworkPolicy: l.networkPolicyUpserted(std::get<NetworkPolicyInfo>(o.info)); break;
    case ObjectKind::kNamespace: l.namespaceUpserted(std::get<NamespaceInfo>(o.info)); break;
  }
}

}  // namespace dpu::control::kube
