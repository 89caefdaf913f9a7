// Streaming decoder for Kubernetes objects, lists and watch events.
//
// A small JSON reader (JsonReader) emits SAX events; one handler (Decoder)
// walks them with a stack of frames. Each frame carries a small state saying
// where we are inside the object ("spec.containers[].ports[]",
// "metadata.labels", ...); the state of a child is chosen from its parent's
// state and the key, so the fields the agent reads of Nodes, Pods and
// EndpointSlices — nearly every object (and change) of a large cluster — are
// written straight into the Info structs and every other subtree is skipped
// without building anything; the checks they share with the cluster file
// (validateEndpointSlice, containerPortProblem) run on the structs. A
// Service's spec and status and a NetworkPolicy's spec are captured as a
// small DOM of that part only and read by cluster_objects.h's readers, which
// the file source uses on its entries too: the same validation for both.
#include "control/kube_objects.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <streambuf>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config_doc.h"
#include "common/net_address.h"
#include "control/cluster_objects.h"

namespace dpu::control {
namespace {

using nlohmann::json;

enum class S : uint8_t {
  kSkip,
  kRoot,
  kListMeta,
  kItems,
  kObj,
  kMeta,
  kLabels,
  kAnnotations,
  kNodeSpec,
  kNodePodCidrs,
  kPodSpec,
  kPodContainers,
  kPodContainer,
  kPodContainerPorts,
  kPodContainerPort,
  kPodStatus,
  kPodIps,
  kPodIpElem,
  kSliceEndpoints,
  kSliceEndpoint,
  kSliceAddresses,
  kSliceConditions,
  kSliceTargetRef,
  kSlicePorts,
  kSlicePort,
  kCapture,
};

enum class Mode { kSingle, kList, kEvent };

struct Scalar {
  enum class T { kStr, kInt, kUint, kFloat, kBool, kNull } t = T::kNull;
  std::string* s = nullptr;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
};

const char* typeName(const Scalar& v) {
  switch (v.t) {
    case Scalar::T::kStr: return "a string";
    case Scalar::T::kInt:
    case Scalar::T::kUint:
    case Scalar::T::kFloat: return "a number";
    case Scalar::T::kBool: return "a boolean";
    case Scalar::T::kNull: return "null";
  }
  return "a value";
}

json toJsonValue(const Scalar& v) {
  switch (v.t) {
    case Scalar::T::kStr: return std::move(*v.s);
    case Scalar::T::kInt: return v.i;
    case Scalar::T::kUint: return v.u;
    case Scalar::T::kFloat: return v.d;
    case Scalar::T::kBool: return v.b;
    case Scalar::T::kNull: return nullptr;
  }
  return nullptr;
}

constexpr size_t kMaxDepth = 64;

// Which top-level fields of an object are captured whole (as a small DOM) and
// read by the shared readers of cluster_objects.h, which the cluster file uses
// too. Nodes, Pods and EndpointSlices, the bulk of a cluster (and of its
// changes), are decoded field by field, then checked by the same validation
// as the file's (validateEndpointSlice, containerPortProblem).
bool captured(ObjectKind kind, std::string_view key) {
  switch (kind) {
    case ObjectKind::kService: return key == "spec" || key == "status";
    case ObjectKind::kNetworkPolicy: return key == "spec";
    default: return false;
  }
}

// A JSON scalar as the message about it shows it.
std::string shown(const Scalar& v) {
  switch (v.t) {
    case Scalar::T::kStr: return json(*v.s).dump();
    case Scalar::T::kInt: return std::to_string(v.i);
    case Scalar::T::kUint: return std::to_string(v.u);
    case Scalar::T::kFloat: return json(v.d).dump();
    case Scalar::T::kBool: return v.b ? "true" : "false";
    case Scalar::T::kNull: return "null";
  }
  return "a value";
}

class Decoder {
 public:
  Decoder(Mode mode, ObjectKind kind, const KubeItemSink* sink) : mode_(mode), kind_(kind), sink_(sink) {
    frames_.reserve(16);
  }

  // --- the SAX interface (nlohmann's shape), called by JsonReader ---
  bool null() { return scalar(Scalar{}); }
  bool boolean(bool val) {
    Scalar v;
    v.t = Scalar::T::kBool;
    v.b = val;
    return scalar(v);
  }
  bool number_integer(json::number_integer_t val) {
    Scalar v;
    v.t = Scalar::T::kInt;
    v.i = val;
    return scalar(v);
  }
  bool number_unsigned(json::number_unsigned_t val) {
    Scalar v;
    v.t = Scalar::T::kUint;
    v.u = val;
    return scalar(v);
  }
  bool number_float(json::number_float_t val, const json::string_t&) {
    Scalar v;
    v.t = Scalar::T::kFloat;
    v.d = val;
    return scalar(v);
  }
  bool string(json::string_t& val) {
    Scalar v;
    v.t = Scalar::T::kStr;
    v.s = &val;
    return scalar(v);
  }
  bool start_object(std::size_t) { return startContainer(false); }
  bool start_array(std::size_t) { return startContainer(true); }
  bool end_object() { return endContainer(); }
  bool end_array() { return endContainer(); }
  bool key(json::string_t& val) {
    key_ = val;
    return true;
  }
  void syntaxError(size_t position, const char* what) {
    if (fatal_.empty()) fatal_ = "invalid JSON at byte " + std::to_string(position) + ": " + what;
  }

  // Completes a decoded object: the parts captured whole are read, defaults
  // applied, everything validated. `name_only` (a DELETED event): only the
  // name matters.
  void complete(KubeObject& o, bool name_only);

  // --- results ---
  std::string fatal_;
  KubeListPage page_;
  KubeStatus status_;
  std::string root_kind_;
  std::string event_type_;
  bool have_object_ = false;
  KubeObject object_;

 private:
  struct Frame {
    S state;
    bool array;
  };

  // Where a value at the current position of a captured subtree goes.
  json& captureSlot() {
    json& parent = *capture_.back();
    if (parent.is_array()) {
      parent.push_back(nullptr);
      return parent.back();
    }
    return parent[key_];
  }

  bool startContainer(bool array) {
    if (frames_.size() >= kMaxDepth) {
      fatal_ = "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels";
      return false;
    }
    S child;
    if (frames_.empty()) {
      if (array) {
        fatal_ = "expected a JSON object, got an array";
        return false;
      }
      if (mode_ == Mode::kSingle) {
        beginObject();
        child = S::kObj;
      } else {
        child = S::kRoot;
      }
    } else {
      Frame& parent = frames_.back();
      if (parent.state == S::kCapture) {
        json& slot = captureSlot();
        slot = array ? json::array() : json::object();
        // Pointers on the path stay valid: only the innermost container grows.
        capture_.push_back(&slot);
        child = S::kCapture;
      } else if (parent.state == S::kSkip) {
        child = S::kSkip;
      } else if (parent.state == S::kObj && !parent.array && captured(kind_, key_)) {
        json& slot = dom_[key_];
        slot = array ? json::array() : json::object();
        capture_.push_back(&slot);
        child = S::kCapture;
      } else {
        child = enter(parent.state, parent.array ? std::string_view() : std::string_view(key_), array);
      }
    }
    frames_.push_back(Frame{child, array});
    return true;
  }

  bool endContainer() {
    Frame f = frames_.back();
    frames_.pop_back();
    if (f.state == S::kCapture) {
      capture_.pop_back();
      return true;
    }
    leave(f.state);
    return true;
  }

  bool scalar(const Scalar& v) {
    if (frames_.empty()) {
      fatal_ = std::string("expected a JSON object, got ") + typeName(v);
      return false;
    }
    Frame& f = frames_.back();
    if (f.state == S::kSkip) return true;
    if (f.state == S::kCapture) {
      captureSlot() = toJsonValue(v);
      return true;
    }
    if (f.state == S::kObj && captured(kind_, key_)) {
      dom_[key_] = toJsonValue(v);
      return true;
    }
    onScalar(f.state, f.array ? std::string_view() : std::string_view(key_), v);
    return true;
  }

  // The first problem found in an object is the one reported.
  void fail(const std::string& what) {
    if (in_object_ && object_.error.empty()) object_.error = what;
  }

  void beginObject() {
    object_ = KubeObject{};
    object_.kind = kind_;
    node_ = nullptr;
    pod_ = nullptr;
    labels_ = nullptr;
    slice_ = nullptr;
    pod_cidr_.clear();
    port_keys_text_.clear();
    pod_ip_.clear();
    dom_ = nullptr;  // becomes an object on the first captured field
    capture_.clear();
    address_type_.clear();
    switch (kind_) {
      case ObjectKind::kNode:
        node_ = &object_.info.emplace<NodeInfo>();
        labels_ = &node_->labels;
        break;
      case ObjectKind::kPod:
        pod_ = &object_.info.emplace<PodInfo>();
        labels_ = &pod_->labels;
        break;
      case ObjectKind::kService: labels_ = &object_.info.emplace<ServiceInfo>().labels; break;
      case ObjectKind::kEndpointSlice: slice_ = &object_.info.emplace<EndpointSliceInfo>(); break;
      case ObjectKind::kNetworkPolicy: object_.info.emplace<NetworkPolicyInfo>(); break;
      case ObjectKind::kNamespace: labels_ = &object_.info.emplace<NamespaceInfo>().labels; break;
    }
    in_object_ = true;
    have_object_ = true;
  }

  // A known field that must hold a container got the other kind of container
  // or a scalar.
  void wrongShape(std::string_view field, bool want_array, const char* got) {
    fail(std::string(field) + ": expected " + (want_array ? "an array" : "an object") + ", got " + got);
  }

  // Chooses the state of a container from its parent's state and key.
  S enter(S parent, std::string_view key, bool array) {
    auto want = [&](std::string_view field, bool want_array, S state) {
      if (array != want_array) {
        wrongShape(field, want_array, array ? "an array" : "an object");
        return S::kSkip;
      }
      return state;
    };
    // want() whose field name is made only on a problem.
    auto wantAt = [&](auto&& field, bool want_array, S state) {
      if (array != want_array) {
        wrongShape(field(), want_array, array ? "an array" : "an object");
        return S::kSkip;
      }
      return state;
    };
    // An element of an array of objects.
    auto element = [&](std::string_view field, S state) {
      if (array) {
        fail(std::string(field) + ": expected an object, got an array");
        return S::kSkip;
      }
      return state;
    };
    switch (parent) {
      case S::kRoot:
        if (mode_ == Mode::kList) {
          if (key == "metadata" && !array) return S::kListMeta;
          if (key == "items") {
            if (!array) {
              fatal_ = "items: expected an array";
              return S::kSkip;
            }
            return S::kItems;
          }
        } else if (key == "object" && !array) {
          beginObject();
          return S::kObj;
        }
        return S::kSkip;
      case S::kItems:
        if (array) return S::kSkip;
        beginObject();
        return S::kObj;
      case S::kObj:
        if (key == "metadata") return want("metadata", false, S::kMeta);
        if (key == "spec") {
          if (kind_ == ObjectKind::kNode) return want("spec", false, S::kNodeSpec);
          if (kind_ == ObjectKind::kPod) return want("spec", false, S::kPodSpec);
        }
        if (key == "status" && kind_ == ObjectKind::kPod) return want("status", false, S::kPodStatus);
        if (slice_ != nullptr) {
          if (key == "endpoints") return want("endpoints", true, S::kSliceEndpoints);
          if (key == "ports") return want("ports", true, S::kSlicePorts);
          if (key == "addressType") fail("addressType: expected a string, got " + std::string(array ? "an array" : "an object"));
        }
        return S::kSkip;
      case S::kMeta:
        if (key == "labels") {
          if (labels_ != nullptr || slice_ != nullptr) return want("metadata.labels", false, S::kLabels);
          return S::kSkip;
        }
        if (key == "annotations") {
          if (kind_ == ObjectKind::kNode) return want("metadata.annotations", false, S::kAnnotations);
          return S::kSkip;
        }
        if (key == "name" || key == "namespace" || key == "resourceVersion" || key == "uid")
          fail("metadata." + std::string(key) + ": expected a string");
        return S::kSkip;
      case S::kLabels:
        fail("metadata.labels[" + std::string(key) + "]: expected a string");
        return S::kSkip;
      case S::kAnnotations:
        if (key == kTunnelIpAnnotation || key == kIpsecPublicKeyAnnotation || key == kIpsecEpochAnnotation ||
            key == kIpsecNatAddressAnnotation || key == kPortKeysAnnotation)
          fail("metadata.annotations[" + std::string(key) + "]: expected a string");
        return S::kSkip;
      case S::kNodeSpec:
        if (key == "podCIDRs") return want("spec.podCIDRs", true, S::kNodePodCidrs);
        if (key == "podCIDR") fail("spec.podCIDR: expected a string");
        return S::kSkip;
      case S::kPodSpec:
        if (key == "containers") return want("spec.containers", true, S::kPodContainers);
        if (key == "nodeName" || key == "hostNetwork") fail("spec." + std::string(key) + ": expected a scalar");
        return S::kSkip;
      case S::kPodContainers:
        return element("spec.containers[]", S::kPodContainer);
      case S::kPodContainer:
        if (key == "ports") return want("spec.containers[].ports", true, S::kPodContainerPorts);
        return S::kSkip;
      case S::kPodContainerPorts:
        if (array) {
          fail("spec.containers[].ports[]: expected an object, got an array");
          return S::kSkip;
        }
        pod_->ports.emplace_back();
        return S::kPodContainerPort;
      case S::kPodStatus:
        if (key == "podIPs") return want("status.podIPs", true, S::kPodIps);
        if (key == "podIP") fail("status.podIP: expected a string");
        return S::kSkip;
      case S::kPodIps:
        return element("status.podIPs[]", S::kPodIpElem);
      case S::kSliceEndpoints:
        if (array) {
          fail(endpointPath() + ": expected an object, got an array");
          return S::kSkip;
        }
        slice_->endpoints.emplace_back();
        return S::kSliceEndpoint;
      case S::kSliceEndpoint:
        if (key == "addresses")
          return wantAt([&] { return endpointPath() + ".addresses"; }, true, S::kSliceAddresses);
        if (key == "conditions")
          return wantAt([&] { return endpointPath() + ".conditions"; }, false, S::kSliceConditions);
        if (key == "targetRef")
          return wantAt([&] { return endpointPath() + ".targetRef"; }, false, S::kSliceTargetRef);
        if (key == "nodeName") fail(endpointPath() + ".nodeName: expected a string");
        return S::kSkip;
      case S::kSlicePorts:
        if (array) {
          fail("ports[" + std::to_string(slice_->ports.size()) + "]: expected an object, got an array");
          return S::kSkip;
        }
        slice_->ports.emplace_back();
        return S::kSlicePort;
      case S::kNodePodCidrs:
      case S::kSliceAddresses:
        fail("a list of strings holds " + std::string(array ? "an array" : "an object"));
        return S::kSkip;
      case S::kSliceConditions:
      case S::kSliceTargetRef:
      case S::kSlicePort:
        if (!key.empty()) fail(std::string(key) + ": expected a scalar");
        return S::kSkip;
      case S::kPodIpElem:
      case S::kPodContainerPort:
        if (!key.empty()) fail(std::string(key) + ": expected a scalar");
        return S::kSkip;
      default:
        return S::kSkip;
    }
  }

  void leave(S state) {
    if (state == S::kObj) {
      finishObject();
    } else if (state == S::kPodContainerPort && !pod_->ports.empty()) {
      if (auto why = containerPortProblem(pod_->ports.back()); !why.empty()) fail("spec.containers[].ports[]: " + why);
    }
  }

  bool str(const Scalar& v, std::string& out, std::string_view field) {
    if (v.t == Scalar::T::kNull) return true;  // omitted
    if (v.t != Scalar::T::kStr) {
      fail(std::string(field) + ": expected a string, got " + typeName(v));
      return false;
    }
    out = std::move(*v.s);
    return true;
  }

  // str() and boolField() for fields whose path is spelt out only on a
  // problem (`where` makes it): the per-endpoint fields of a large sync.
  template <class Where>
  bool strAt(const Scalar& v, std::string& out, const Where& where) {
    if (v.t == Scalar::T::kNull) return true;
    if (v.t != Scalar::T::kStr) {
      fail(where() + ": expected a string, got " + typeName(v));
      return false;
    }
    out = std::move(*v.s);
    return true;
  }
  template <class Where>
  bool boolAt(const Scalar& v, bool& out, const Where& where, bool null_value) {
    if (v.t == Scalar::T::kNull) {
      out = null_value;
      return true;
    }
    if (v.t != Scalar::T::kBool) {
      fail(where() + ": expected a boolean, got " + typeName(v));
      return false;
    }
    out = v.b;
    return true;
  }

  bool boolField(const Scalar& v, bool& out, std::string_view field, bool null_value) {
    if (v.t == Scalar::T::kNull) {
      out = null_value;
      return true;
    }
    if (v.t != Scalar::T::kBool) {
      fail(std::string(field) + ": expected a boolean, got " + typeName(v));
      return false;
    }
    out = v.b;
    return true;
  }

  // Ports: 1..65535, or 0..65535 where zero means "not set".
  bool port(const Scalar& v, uint16_t& out, std::string_view field, bool allow_zero) {
    if (v.t == Scalar::T::kNull && allow_zero) {
      out = 0;
      return true;
    }
    int64_t n;
    if (v.t == Scalar::T::kInt) {
      n = v.i;
    } else if (v.t == Scalar::T::kUint) {
      n = v.u > 100000 ? 100000 : static_cast<int64_t>(v.u);
    } else {
      fail(std::string(field) + ": expected a port number, got " + typeName(v));
      return false;
    }
    if (n < (allow_zero ? 0 : 1) || n > 65535) {
      fail(std::string(field) + ": " + std::to_string(n) + " is not a port (1-65535)");
      return false;
    }
    out = static_cast<uint16_t>(n);
    return true;
  }

  void onScalar(S state, std::string_view key, const Scalar& v) {
    switch (state) {
      case S::kRoot:
        if (key == "type" && mode_ == Mode::kEvent) {
          if (v.t == Scalar::T::kStr) event_type_ = *v.s;
        } else if (key == "kind" && v.t == Scalar::T::kStr) {
          root_kind_ = *v.s;
        } else if (key == "code") {
          status_.code = v.t == Scalar::T::kInt ? v.i : v.t == Scalar::T::kUint ? static_cast<int64_t>(v.u) : 0;
        } else if (key == "reason" && v.t == Scalar::T::kStr) {
          status_.reason = *v.s;
        } else if (key == "message" && v.t == Scalar::T::kStr) {
          status_.message = *v.s;
        } else if (key == "items" && v.t != Scalar::T::kNull && mode_ == Mode::kList) {
          fatal_ = "items: expected an array";
        }
        return;
      case S::kListMeta:
        if (key == "resourceVersion" && v.t == Scalar::T::kStr) page_.resource_version = *v.s;
        if (key == "continue" && v.t == Scalar::T::kStr) page_.continue_token = *v.s;
        return;
      case S::kObj:
        // An ERROR event's object is a Status.
        if (key == "code") {
          status_.code = v.t == Scalar::T::kInt ? v.i : v.t == Scalar::T::kUint ? static_cast<int64_t>(v.u) : 0;
        } else if (key == "reason" && v.t == Scalar::T::kStr) {
          status_.reason = *v.s;
        } else if (key == "message" && v.t == Scalar::T::kStr) {
          status_.message = *v.s;
        } else if (key == "metadata" && v.t != Scalar::T::kNull) {
          fail("metadata: expected an object, got " + std::string(typeName(v)));
        } else if (key == "spec" && v.t != Scalar::T::kNull && (pod_ != nullptr || node_ != nullptr)) {
          fail("spec: expected an object, got " + std::string(typeName(v)));
        } else if (slice_ != nullptr) {
          if (key == "addressType") str(v, address_type_, "addressType");
          if ((key == "endpoints" || key == "ports") && v.t != Scalar::T::kNull)
            fail(std::string(key) + ": expected an array, got " + typeName(v));
        }
        return;
      case S::kMeta:
        if (key == "name") {
          str(v, object_.name, "metadata.name");
        } else if (key == "namespace") {
          str(v, object_.ns, "metadata.namespace");
        } else if (key == "resourceVersion") {
          str(v, object_.resource_version, "metadata.resourceVersion");
        } else if (key == "uid") {
          if (pod_ != nullptr) str(v, pod_->uid, "metadata.uid");
        } else if ((key == "labels" || key == "annotations") && v.t != Scalar::T::kNull) {
          fail("metadata." + std::string(key) + ": expected an object, got " + typeName(v));
        }
        return;
      case S::kLabels: {
        if (v.t != Scalar::T::kStr) {
          fail("metadata.labels[" + std::string(key) + "]: expected a string, got " + typeName(v));
          return;
        }
        if (labels_ != nullptr) {
          labels_->emplace(std::string(key), std::move(*v.s));
        } else if (slice_ != nullptr && key == kServiceNameLabel) {
          slice_->service_name = std::move(*v.s);
        }
        return;
      }
      case S::kAnnotations:
        if (key == kTunnelIpAnnotation) {
          str(v, node_->tunnel_ip, "metadata.annotations[dpu-cni.io/tunnel-ip]");
        } else if (key == kIpsecPublicKeyAnnotation) {
          str(v, node_->ipsec_public_key, "metadata.annotations[dpu-cni.io/ipsec-public-key]");
        } else if (key == kIpsecEpochAnnotation) {
          std::string text;
          if (str(v, text, "metadata.annotations[dpu-cni.io/ipsec-epoch]")) {
            auto epoch = parseIpsecEpochAnnotation(text);
            if (!epoch) fail("metadata.annotations[dpu-cni.io/ipsec-epoch]: " + epoch.error());
            else node_->ipsec_epoch = *epoch;
          }
        } else if (key == kIpsecModeAnnotation) {
          str(v, node_->ipsec_mode, "metadata.annotations[dpu-cni.io/ipsec-mode]");
        } else if (key == kIpsecNatAddressAnnotation) {
          str(v, node_->ipsec_nat_address, "metadata.annotations[dpu-cni.io/ipsec-nat-address]");
        } else if (key == kPortKeysAnnotation) {
          str(v, port_keys_text_, "metadata.annotations[dpu-cni.io/port-keys]");
        }
        return;
      case S::kNodeSpec:
        if (key == "podCIDR") str(v, pod_cidr_, "spec.podCIDR");
        if (key == "podCIDRs" && v.t != Scalar::T::kNull) fail("spec.podCIDRs: expected an array");
        return;
      case S::kNodePodCidrs: {
        std::string s;
        if (str(v, s, "spec.podCIDRs[]")) node_->pod_cidrs.push_back(std::move(s));
        return;
      }
      case S::kPodSpec:
        if (key == "nodeName") str(v, pod_->node_name, "spec.nodeName");
        if (key == "hostNetwork") boolField(v, pod_->host_network, "spec.hostNetwork", false);
        if (key == "containers" && v.t != Scalar::T::kNull) fail("spec.containers: expected an array");
        return;
      case S::kPodContainers:
        fail("spec.containers[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kPodContainer:
        if (key == "ports" && v.t != Scalar::T::kNull) fail("spec.containers[].ports: expected an array");
        return;
      case S::kPodContainerPorts:
        fail("spec.containers[].ports[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kPodContainerPort: {
        ContainerPort& p = pod_->ports.back();
        if (key == "name") {
          str(v, p.name, "spec.containers[].ports[].name");
        } else if (key == "containerPort") {
          port(v, p.port, "spec.containers[].ports[].containerPort", false);
        } else if (key == "protocol" && v.t != Scalar::T::kNull) {
          std::string name;
          if (!str(v, name, "spec.containers[].ports[].protocol")) return;
          if (auto proto = protocolFromName(name)) p.protocol = *proto;
          else fail("spec.containers[].ports[].protocol: must be TCP, UDP or SCTP, not \"" + name + "\"");
        }
        return;
      }
      case S::kPodStatus:
        if (key == "podIP") str(v, pod_ip_, "status.podIP");
        if (key == "podIPs" && v.t != Scalar::T::kNull) fail("status.podIPs: expected an array");
        return;
      case S::kPodIpElem:
        if (key == "ip") {
          std::string s;
          if (str(v, s, "status.podIPs[].ip")) pod_->ips.push_back(std::move(s));
        }
        return;
      case S::kPodIps:
        fail("status.podIPs[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kSliceEndpoints:
        fail(endpointPath(slice_->endpoints.size()) + ": expected an object, got " + typeName(v));
        return;
      case S::kSliceEndpoint:
        if (key == "nodeName") strAt(v, slice_->endpoints.back().node_name, [&] { return endpointPath() + ".nodeName"; });
        if ((key == "addresses" || key == "conditions" || key == "targetRef") && v.t != Scalar::T::kNull)
          fail(endpointPath() + "." + std::string(key) + ": expected a container, got " + typeName(v));
        return;
      case S::kSliceAddresses: {
        auto& addresses = slice_->endpoints.back().addresses;
        std::string a;
        if (strAt(v, a, [&] { return endpointPath() + ".addresses[" + std::to_string(addresses.size()) + "]"; }))
          addresses.push_back(std::move(a));
        return;
      }
      case S::kSliceConditions: {
        // A nil condition reads as the API says: ready and serving true, terminating false.
        EndpointInfo& e = slice_->endpoints.back();
        auto where = [&] { return endpointPath() + ".conditions." + std::string(key); };
        if (key == "ready") boolAt(v, e.ready, where, true);
        else if (key == "serving") boolAt(v, e.serving, where, true);
        else if (key == "terminating") boolAt(v, e.terminating, where, false);
        return;
      }
      case S::kSliceTargetRef: {
        ObjectRef& ref = slice_->endpoints.back().target_ref;
        auto where = [&] { return endpointPath() + ".targetRef." + std::string(key); };
        if (key == "kind") strAt(v, ref.kind, where);
        else if (key == "namespace") strAt(v, ref.ns, where);
        else if (key == "name") strAt(v, ref.name, where);
        return;
      }
      case S::kSlicePorts:
        fail("ports[" + std::to_string(slice_->ports.size()) + "]: expected an object, got " + typeName(v));
        return;
      case S::kSlicePort: {
        EndpointSliceInfo::Port& p = slice_->ports.back();
        auto at = [&] { return "ports[" + std::to_string(slice_->ports.size() - 1) + "]." + std::string(key); };
        if (key == "name") {
          strAt(v, p.name, at);
        } else if (key == "protocol" && v.t != Scalar::T::kNull) {
          std::string name;
          if (!strAt(v, name, at)) return;
          if (auto proto = protocolFromName(name)) p.protocol = *proto;
          else fail(at() + ": must be TCP, UDP or SCTP, not \"" + name + "\"");
        } else if (key == "port" && v.t != Scalar::T::kNull) {
          // Absent: every port. Given: 1..65535, as the API validates it.
          bool number = v.t == Scalar::T::kInt || v.t == Scalar::T::kUint;
          int64_t n = v.t == Scalar::T::kInt ? v.i : v.t == Scalar::T::kUint && v.u <= 65535 ? static_cast<int64_t>(v.u) : -1;
          if (!number) fail(at() + ": must be an integer between 1 and 65535, not " + shown(v));
          else if (n < 1 || n > 65535) fail(at() + ": must be between 1 and 65535, not " + shown(v));
          else p.port = static_cast<uint16_t>(n);
        }
        return;
      }
      default:
        return;
    }
  }

  void finishObject() {
    in_object_ = false;
    if (node_ != nullptr && node_->pod_cidrs.empty() && !pod_cidr_.empty()) node_->pod_cidrs.push_back(pod_cidr_);
    if (node_ != nullptr && !port_keys_text_.empty()) {
      auto keys = parsePortKeysAnnotation(port_keys_text_);
      if (!keys && object_.error.empty()) object_.error = "metadata.annotations[dpu-cni.io/port-keys]: " + keys.error();
      if (keys) node_->port_keys = std::move(*keys);
    }
    if (pod_ != nullptr && pod_->ips.empty() && !pod_ip_.empty()) pod_->ips.push_back(pod_ip_);
    if (mode_ == Mode::kList) {
      page_.items++;
      complete(object_, false);
      if (sink_ != nullptr && *sink_) (*sink_)(std::move(object_));
      object_ = KubeObject{};
    }
  }

  // "endpoints[N]" of the endpoint being read (or of index `at`).
  std::string endpointPath() const { return endpointPath(slice_->endpoints.size() - 1); }
  static std::string endpointPath(size_t at) { return "endpoints[" + std::to_string(at) + "]"; }

  Mode mode_;
  ObjectKind kind_;
  const KubeItemSink* sink_;
  std::vector<Frame> frames_;
  std::string key_;
  bool in_object_ = false;
  NodeInfo* node_ = nullptr;
  PodInfo* pod_ = nullptr;
  std::map<std::string, std::string>* labels_ = nullptr;  // where metadata.labels go
  EndpointSliceInfo* slice_ = nullptr;
  std::string pod_cidr_;
  std::string port_keys_text_;
  std::string pod_ip_;
  std::string address_type_;  // an EndpointSlice's, as given ("" when absent)
  // The captured fields of the current object (see captured()) and the path
  // of containers being filled.
  json dom_;
  std::vector<json*> capture_;
};

// A JSON reader that drives the Decoder's SAX interface (nlohmann's SAX
// shape). nlohmann's own SAX parser copies every string byte by byte through
// its input adapter: bench/control.sh measured it at 1.43 times our initial
// sync of 150,000 pods (1.35 times the CPU), so this one stays; it appends
// whole runs of plain string bytes at once and reads a contiguous buffer
// refilled in 64 KiB chunks. It accepts exactly RFC 8259 JSON (UTF-8 checked,
// no comments, no trailing commas, nothing after the value).
class JsonReader {
 public:
  JsonReader(std::string_view text, Decoder& sax)
      : base_(text.data()), p_(text.data()), end_(text.data() + text.size()), sax_(sax) {}
  JsonReader(std::streambuf* sb, Decoder& sax) : sb_(sb), sax_(sax) {
    buf_.resize(64 * 1024);
    base_ = p_ = end_ = buf_.data();
  }

  bool parse() {
    enum class Next { kValue, kKey, kAfter };
    Next next = Next::kValue;
    while (true) {
      int c = skipWs();
      switch (next) {
        case Next::kValue:
          switch (c) {
            case '{':
              ++p_;
              if (!sax_.start_object(0)) return false;
              stack_.push_back(true);
              if (skipWs() == '}') {
                ++p_;
                stack_.pop_back();
                if (!sax_.end_object()) return false;
                next = Next::kAfter;
              } else {
                next = Next::kKey;
              }
              continue;
            case '[':
              ++p_;
              if (!sax_.start_array(0)) return false;
              stack_.push_back(false);
              if (skipWs() == ']') {
                ++p_;
                stack_.pop_back();
                if (!sax_.end_array()) return false;
                next = Next::kAfter;
              } else {
                next = Next::kValue;
              }
              continue;
            case '"':
              ++p_;
              if (!readString()) return false;
              if (!sax_.string(str_)) return false;
              break;
            case 't':
              if (!literal("true")) return false;
              if (!sax_.boolean(true)) return false;
              break;
            case 'f':
              if (!literal("false")) return false;
              if (!sax_.boolean(false)) return false;
              break;
            case 'n':
              if (!literal("null")) return false;
              if (!sax_.null()) return false;
              break;
            default:
              if (c == '-' || (c >= '0' && c <= '9')) {
                if (!readNumber()) return false;
                break;
              }
              return fail(c < 0 ? "unexpected end of input" : "unexpected character");
          }
          next = Next::kAfter;
          continue;
        case Next::kKey:
          if (c != '"') return fail("expected a string key");
          ++p_;
          if (!readString()) return false;
          if (!sax_.key(str_)) return false;
          if (skipWs() != ':') return fail("expected ':'");
          ++p_;
          next = Next::kValue;
          continue;
        case Next::kAfter:
          if (stack_.empty()) {
            if (c >= 0) return fail("unexpected data after the JSON value");
            return true;
          }
          if (c == ',') {
            ++p_;
            next = stack_.back() ? Next::kKey : Next::kValue;
            continue;
          }
          if (c == (stack_.back() ? '}' : ']')) {
            ++p_;
            bool obj = stack_.back();
            stack_.pop_back();
            if (!(obj ? sax_.end_object() : sax_.end_array())) return false;
            continue;
          }
          return fail(c < 0 ? "unexpected end of input" : "expected ',' or the end of the container");
      }
    }
  }

 private:
  // The next byte without consuming it; -1 at the end of the input.
  int peek() {
    if (p_ == end_ && !refill()) return -1;
    return static_cast<unsigned char>(*p_);
  }
  bool refill() {
    if (sb_ == nullptr) return false;
    consumed_ += static_cast<size_t>(end_ - base_);
    std::streamsize n = sb_->sgetn(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    p_ = buf_.data();
    end_ = p_ + (n > 0 ? n : 0);
    return n > 0;
  }
  int skipWs() {
    while (true) {
      int c = peek();
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
      ++p_;
    }
  }
  bool fail(const char* what) {
    sax_.syntaxError(consumed_ + static_cast<size_t>(p_ - base_), what);
    return false;
  }
  bool literal(const char* word) {
    for (const char* w = word; *w != '\0'; ++w) {
      if (peek() != *w) return fail("invalid literal");
      ++p_;
    }
    return true;
  }
  bool readNumber() {
    num_.clear();
    bool is_float = false;
    while (true) {
      int c = peek();
      if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
      } else {
        break;
      }
      num_ += static_cast<char>(c);
      ++p_;
      if (num_.size() > 64) return fail("number too long");
    }
    // RFC 8259 grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const char* s = num_.c_str();
    const char* q = s;
    if (*q == '-') ++q;
    if (*q == '0') {
      ++q;
    } else if (*q >= '1' && *q <= '9') {
      while (*q >= '0' && *q <= '9') ++q;
    } else {
      return fail("invalid number");
    }
    if (*q == '.') {
      ++q;
      if (!(*q >= '0' && *q <= '9')) return fail("invalid number");
      while (*q >= '0' && *q <= '9') ++q;
    }
    if (*q == 'e' || *q == 'E') {
      ++q;
      if (*q == '+' || *q == '-') ++q;
      if (!(*q >= '0' && *q <= '9')) return fail("invalid number");
      while (*q >= '0' && *q <= '9') ++q;
    }
    if (*q != '\0') return fail("invalid number");
    if (!is_float) {
      errno = 0;
      if (s[0] == '-') {
        long long v = std::strtoll(s, nullptr, 10);
        if (errno == 0) return sax_.number_integer(v);
      } else {
        unsigned long long v = std::strtoull(s, nullptr, 10);
        if (errno == 0) return sax_.number_unsigned(v);
      }
    }
    return sax_.number_float(std::strtod(s, nullptr), num_);
  }
  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool hex4(uint32_t& v) {
    v = 0;
    for (int i = 0; i < 4; ++i) {
      int c = peek();
      if (c < 0) return fail("unexpected end of input in a \\u escape");
      ++p_;
      if (c >= '0' && c <= '9') v = v * 16 + static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v = v * 16 + static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v = v * 16 + static_cast<uint32_t>(c - 'A' + 10);
      else return fail("invalid \\u escape");
    }
    return true;
  }
  static bool validUtf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        ++i;
        continue;
      }
      size_t n;
      uint32_t cp;
      if ((c & 0xE0) == 0xC0) {
        n = 1;
        cp = c & 0x1F;
      } else if ((c & 0xF0) == 0xE0) {
        n = 2;
        cp = c & 0x0F;
      } else if ((c & 0xF8) == 0xF0) {
        n = 3;
        cp = c & 0x07;
      } else {
        return false;
      }
      if (i + n >= s.size()) return false;
      for (size_t k = 1; k <= n; ++k) {
        auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) return false;
        cp = (cp << 6) | (cc & 0x3F);
      }
      if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
          (cp >= 0xD800 && cp <= 0xDFFF))
        return false;
      i += n + 1;
    }
    return true;
  }
  // After the opening quote; leaves the text in str_.
  bool readString() {
    str_.clear();
    bool high = false;
    while (true) {
      if (p_ == end_ && !refill()) return fail("unexpected end of input in a string");
      const char* run = p_;
      while (p_ < end_) {
        auto c = static_cast<unsigned char>(*p_);
        if (c == '"' || c == '\\' || c < 0x20) break;
        high |= c >= 0x80;
        ++p_;
      }
      str_.append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) continue;
      char c = *p_++;
      if (c == '"') break;
      if (c != '\\') return fail("control character in a string");
      int e = peek();
      if (e < 0) return fail("unexpected end of input in a string");
      ++p_;
      switch (e) {
        case '"': str_ += '"'; break;
        case '\\': str_ += '\\'; break;
        case '/': str_ += '/'; break;
        case 'b': str_ += '\b'; break;
        case 'f': str_ += '\f'; break;
        case 'n': str_ += '\n'; break;
        case 'r': str_ += '\r'; break;
        case 't': str_ += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (peek() != '\\') return fail("unpaired surrogate in a \\u escape");
            ++p_;
            if (peek() != 'u') return fail("unpaired surrogate in a \\u escape");
            ++p_;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("unpaired surrogate in a \\u escape");
          }
          appendUtf8(str_, cp);
          break;
        }
        default:
          return fail("invalid escape in a string");
      }
    }
    if (high && !validUtf8(str_)) return fail("a string is not valid UTF-8");
    return true;
  }

  const char* base_ = nullptr;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  std::streambuf* sb_ = nullptr;
  std::vector<char> buf_;
  size_t consumed_ = 0;
  Decoder& sax_;
  std::vector<bool> stack_;
  std::string str_;
  std::string num_;
};

bool namespaced(ObjectKind kind) { return kind != ObjectKind::kNode && kind != ObjectKind::kNamespace; }

}  // namespace

std::string formatPortKeysAnnotation(const std::map<std::string, uint32_t>& keys) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [ip, key] : keys) j[ip] = key;
  return j.dump();
}

Result<std::map<std::string, uint32_t>> parsePortKeysAnnotation(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Error{"expected a JSON object of \"<pod address>\": <key>"};
  std::map<std::string, uint32_t> out;
  for (const auto& [k, v] : j.items()) {
    auto ip = IpAddress::parse(k);
    if (!ip) return Error{"'" + k + "' is not an IP address"};
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 32767) {
      return Error{"the key of " + k + " must be a number 1..32767 (15-bit OVN port key)"};
    }
    out[ip->str()] = static_cast<uint32_t>(v.get<uint64_t>());
  }
  return out;
}

namespace {

std::string checkIp(const std::string& text, std::string_view field) {
  auto ip = IpAddress::parse(text);
  if (!ip.ok()) return std::string(field) + ": '" + text + "' is not an IP address";
  return {};
}

// A captured part, or an empty object when the object has none.
const json& part(const json& dom, const char* key) {
  static const json kEmpty = json::object();
  auto it = dom.find(key);
  return it == dom.end() || it->is_null() ? kEmpty : *it;
}

}  // namespace

void Decoder::complete(KubeObject& o, bool name_only) {
  if (!o.error.empty()) return;
  if (o.name.empty()) {
    o.error = "metadata.name is missing";
    return;
  }
  if (name_only) return;
  if (namespaced(o.kind) && o.ns.empty()) {
    o.error = "metadata.namespace is missing";
    return;
  }
  std::string e;
  switch (o.kind) {
    case ObjectKind::kNode: {
      NodeInfo& n = std::get<NodeInfo>(o.info);
      n.name = o.name;
      if (!n.tunnel_ip.empty() && !(e = checkIp(n.tunnel_ip, "annotation dpu-cni.io/tunnel-ip")).empty()) break;
      for (const auto& c : n.pod_cidrs)
        if (!IpPrefix::parse(c).ok()) {
          e = "spec.podCIDRs: '" + c + "' is not a CIDR with the host bits clear";
          break;
        }
      break;
    }
    case ObjectKind::kPod: {
      PodInfo& p = std::get<PodInfo>(o.info);
      p.ns = o.ns;
      p.name = o.name;
      for (const auto& ip : p.ips)
        if (!(e = checkIp(ip, "status.podIPs")).empty()) break;
      break;
    }
    case ObjectKind::kNamespace: {
      NamespaceInfo& n = std::get<NamespaceInfo>(o.info);
      n.name = o.name;
      // Set by every API server since 1.21; an older one's namespaces get it here.
      n.labels.try_emplace(kNamespaceNameLabel, o.name);
      break;
    }
    case ObjectKind::kService: {
      ServiceInfo& s = std::get<ServiceInfo>(o.info);
      s.ns = o.ns;
      s.name = o.name;
      FieldReader spec(part(dom_, "spec"), "spec");
      FieldReader status(part(dom_, "status"), "status");
      if (auto r = readServiceSpec(spec, s, false); !r) e = r.error();
      else if (auto st = readServiceStatus(status, s, false); !st) e = st.error();
      break;
    }
    case ObjectKind::kEndpointSlice: {
      EndpointSliceInfo& s = std::get<EndpointSliceInfo>(o.info);
      s.ns = o.ns;
      s.name = o.name;
      if (!address_type_.empty()) {
        if (auto t = addressTypeFromName(address_type_)) s.address_type = *t;
        else e = "addressType: must be IPv4, IPv6 or FQDN, not \"" + address_type_ + "\"";
      }
      if (e.empty())
        if (auto problem = validateEndpointSlice(s)) e = problem.str();
      break;
    }
    case ObjectKind::kNetworkPolicy: {
      NetworkPolicyInfo& p = std::get<NetworkPolicyInfo>(o.info);
      p.ns = o.ns;
      p.name = o.name;
      FieldReader spec(part(dom_, "spec"), "spec");
      if (auto r = readNetworkPolicySpec(spec, p, false); !r) e = r.error();
      break;
    }
  }
  o.error = std::move(e);
}

namespace {

template <class Input>
bool runSax(Input&& input, Decoder& d) {
  try {
    JsonReader reader(std::forward<Input>(input), d);
    bool ok = reader.parse();
    if (!ok && d.fatal_.empty()) d.fatal_ = "the JSON could not be parsed";
    return ok && d.fatal_.empty();
  } catch (const std::exception& e) {
    d.fatal_ = std::string("reading the body failed: ") + e.what();
    return false;
  }
}

Result<KubeListPage> finishList(Decoder& d, ObjectKind kind) {
  if (!d.fatal_.empty()) return Error{std::string("decoding the ") + kubeKindName(kind) + " list: " + d.fatal_};
  if (d.root_kind_ == "Status")
    return Error{std::string("the API server answered the ") + kubeKindName(kind) + " list with a Status (code " +
                 std::to_string(d.status_.code) + "): " + d.status_.message};
  return std::move(d.page_);
}

// One object's text decoded; a malformed one comes back with its error set
// (and its name as far as it was read), a text that is no JSON object as an Error.
Result<KubeObject> decodeObject(ObjectKind kind, std::string_view text) {
  Decoder d(Mode::kSingle, kind, nullptr);
  if (!runSax(text, d)) return Error{std::string("decoding a ") + kubeKindName(kind) + ": " + d.fatal_};
  d.complete(d.object_, false);
  return std::move(d.object_);
}

}  // namespace

const char* kubeKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "Node";
    case ObjectKind::kPod: return "Pod";
    case ObjectKind::kService: return "Service";
    case ObjectKind::kEndpointSlice: return "EndpointSlice";
    case ObjectKind::kNetworkPolicy: return "NetworkPolicy";
    case ObjectKind::kNamespace: return "Namespace";
  }
  return "Object";
}

const char* kubeApiVersion(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kEndpointSlice: return "discovery.k8s.io/v1";
    case ObjectKind::kNetworkPolicy: return "networking.k8s.io/v1";
    default: return "v1";
  }
}

std::string KubeObject::describe() const {
  std::string s = kubeKindName(kind);
  s += ' ';
  if (!ns.empty()) s += ns + "/";
  s += name.empty() ? std::string("<unnamed>") : name;
  return s;
}

Result<KubeObject> parseKubeObject(ObjectKind kind, std::string_view text) {
  auto o = decodeObject(kind, text);
  if (!o) return o;
  if (!o->ok()) return Error{"malformed " + o->describe() + ": " + o->error};
  return o;
}

Result<KubeListPage> parseKubeList(ObjectKind kind, std::istream& body, const KubeItemSink& on_item) {
  Decoder d(Mode::kList, kind, &on_item);
  runSax(body.rdbuf(), d);
  return finishList(d, kind);
}

Result<KubeListPage> parseKubeList(ObjectKind kind, std::string_view body, const KubeItemSink& on_item) {
  Decoder d(Mode::kList, kind, &on_item);
  runSax(body, d);
  return finishList(d, kind);
}

Result<KubeWatchEvent> parseKubeWatchEvent(ObjectKind kind, std::string_view line) {
  Decoder d(Mode::kEvent, kind, nullptr);
  if (!runSax(line, d)) return Error{std::string("decoding a ") + kubeKindName(kind) + " watch event: " + d.fatal_};
  KubeWatchEvent ev;
  const std::string& t = d.event_type_;
  if (t == "ADDED") {
    ev.type = KubeWatchEvent::Type::kAdded;
  } else if (t == "MODIFIED") {
    ev.type = KubeWatchEvent::Type::kModified;
  } else if (t == "DELETED") {
    ev.type = KubeWatchEvent::Type::kDeleted;
  } else if (t == "BOOKMARK") {
    ev.type = KubeWatchEvent::Type::kBookmark;
  } else if (t == "ERROR") {
    ev.type = KubeWatchEvent::Type::kError;
  } else {
    return Error{std::string("a ") + kubeKindName(kind) + " watch event has type '" + t +
                 "', not ADDED, MODIFIED, DELETED, BOOKMARK or ERROR"};
  }
  if (ev.type == KubeWatchEvent::Type::kError) {
    ev.status = std::move(d.status_);
    return ev;
  }
  if (!d.have_object_) return Error{std::string("a ") + kubeKindName(kind) + " " + t + " event has no object"};
  if (ev.type == KubeWatchEvent::Type::kBookmark) {
    ev.object = std::move(d.object_);
    if (ev.object.resource_version.empty()) return Error{"a BOOKMARK event has no metadata.resourceVersion"};
    ev.object.error.clear();
    return ev;
  }
  d.complete(d.object_, ev.type == KubeWatchEvent::Type::kDeleted);
  ev.object = std::move(d.object_);
  return ev;
}

KubeStatus parseKubeStatus(std::string_view body) {
  Decoder d(Mode::kList, ObjectKind::kNode, nullptr);
  runSax(body, d);
  if (d.root_kind_ != "Status") return KubeStatus{};
  return d.status_;
}

namespace {

// The ObjectKind of an apiVersion/kind pair the agent reads.
std::optional<ObjectKind> kindOf(const std::string& api_version, const std::string& kind) {
  for (ObjectKind k : {ObjectKind::kNode, ObjectKind::kPod, ObjectKind::kService, ObjectKind::kEndpointSlice,
                       ObjectKind::kNetworkPolicy, ObjectKind::kNamespace})
    if (kind == kubeKindName(k) && api_version == kubeApiVersion(k)) return k;
  return std::nullopt;
}

// A string field of an object, "" when absent or not a string.
std::string textOf(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void decodeDocument(const json& doc, const std::string& where, std::vector<KubeDocument>& out) {
  KubeDocument d;
  d.where = where;
  auto refuse = [&](const std::string& why) {
    d.object.error = why;
    out.push_back(std::move(d));
  };
  if (!doc.is_object()) return refuse("expected a Kubernetes object, got " + std::string(doc.type_name()));
  std::string api_version = textOf(doc, "apiVersion");
  std::string kind = textOf(doc, "kind");
  d.kind = kind;
  if (auto meta = doc.find("metadata"); meta != doc.end() && meta->is_object()) {
    d.object.ns = textOf(*meta, "namespace");
    d.object.name = textOf(*meta, "name");
  }
  // A List (kubectl get -o yaml of several objects): its items, one by one.
  if (kind == "List" || (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "List") == 0)) {
    auto found = doc.find("items");
    if (found == doc.end() || !found->is_array()) return refuse("a " + kind + " without an items array");
    const json* items = &*found;
    std::string item_kind = kind == "List" ? "" : kind.substr(0, kind.size() - 4);
    for (size_t i = 0; i < items->size(); ++i) {
      json item = (*items)[i];
      if (item.is_object() && !item_kind.empty()) {
        if (!item.contains("kind")) item["kind"] = item_kind;
        if (!item.contains("apiVersion")) item["apiVersion"] = api_version;
      }
      decodeDocument(item, where + " items[" + std::to_string(i) + "]", out);
    }
    return;
  }
  auto k = kindOf(api_version, kind);
  if (!k) {
    return refuse("apiVersion \"" + api_version + "\" kind \"" + kind +
                  "\" is not an object the agent reads (v1 Node, Pod, Service, Namespace; discovery.k8s.io/v1 "
                  "EndpointSlice; networking.k8s.io/v1 NetworkPolicy)");
  }
  d.object.kind = *k;
  // kubectl puts an object that names no namespace into its context's
  // namespace; a file has no context, so that is "default". (A watch always
  // carries the namespace: there the decoder still requires it.)
  const json* object = &doc;
  json with_ns;
  auto meta = doc.find("metadata");
  if (namespaced(*k) && d.object.ns.empty() && (meta == doc.end() || meta->is_null() || meta->is_object())) {
    with_ns = doc;
    with_ns["metadata"]["namespace"] = "default";
    d.object.ns = "default";
    object = &with_ns;
  }
  auto o = decodeObject(*k, object->dump());
  if (!o) return refuse(o.error());
  d.object = std::move(*o);
  out.push_back(std::move(d));
}

}  // namespace

Result<std::vector<KubeDocument>> decodeKubeDocuments(std::string_view text, const std::string& origin) {
  auto docs = parseConfigDocuments(text, origin);
  if (!docs) return std::move(docs).takeError();
  std::vector<KubeDocument> out;
  for (size_t i = 0; i < docs->size(); ++i)
    decodeDocument((*docs)[i], origin + " document " + std::to_string(i + 1), out);
  return out;
}

json toJson(const KubeObject& o) {
  json j = std::visit([](const auto& info) { return dpu::control::toJson(info); }, o.info);
  j["kind"] = kubeKindName(o.kind);
  return j;
}

namespace {

// FNV-1a over what the agent reads of an object, field by field.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= c[i];
      h *= 1099511628211ull;
    }
  }
  void num(uint64_t v) { bytes(&v, sizeof v); }
  // Length-prefixed, so ("ab","c") and ("a","bc") differ.
  void add(const std::string& s) {
    num(s.size());
    bytes(s.data(), s.size());
  }
  template <class T>
    requires(std::is_integral_v<T> || std::is_enum_v<T>)
  void add(T v) {
    num(static_cast<uint64_t>(v));
  }
  template <class T>
  void add(const std::vector<T>& v) {
    num(v.size());
    for (const auto& x : v) add(x);
  }
  template <class K, class V>
  void add(const std::map<K, V>& m) {
    num(m.size());
    for (const auto& [k, v] : m) {
      add(k);
      add(v);
    }
  }
  template <class T>
  void add(const std::optional<T>& o) {
    num(o.has_value());
    if (o) add(*o);
  }
  template <class... T>
  void all(const T&... v) {
    (add(v), ...);
  }
  void add(const PortRef& p) { all(p.number, p.name); }
  void add(const ContainerPort& p) { all(p.name, p.port, p.protocol); }
  void add(const ServicePort& p) { all(p.name, p.protocol, p.port, p.target_port, p.node_port); }
  void add(const ObjectRef& r) { all(r.kind, r.ns, r.name); }
  void add(const EndpointInfo& e) { all(e.addresses, e.ready, e.serving, e.terminating, e.node_name, e.target_ref); }
  void add(const EndpointSliceInfo::Port& p) { all(p.name, p.protocol, p.port); }
  void add(const SelectorRequirement& r) { all(r.key, r.op, r.values); }
  void add(const LabelSelector& s) { all(s.match_labels, s.match_expressions); }
  void add(const IpBlock& b) { all(b.cidr, b.except); }
  void add(const NetworkPolicyPeer& p) { all(p.pod_selector, p.namespace_selector, p.ip_block); }
  void add(const NetworkPolicyPort& p) { all(p.protocol, p.port, p.end_port); }
  void add(const NetworkPolicyRule& r) { all(r.peers, r.ports); }

  void add(const NodeInfo& n) { all(n.tunnel_ip, n.pod_cidrs, n.ipsec_public_key, n.ipsec_epoch, n.ipsec_mode, n.ipsec_nat_address, n.labels,
                                   n.port_keys); }
  void add(const PodInfo& p) { all(p.uid, p.node_name, p.ips, p.labels, p.host_network, p.ports); }
  void add(const NamespaceInfo& n) { all(n.labels); }
  void add(const ServiceInfo& s) {
    all(s.labels, s.type, s.headless, s.cluster_ips, s.ports, s.external_ips, s.load_balancer_ips, s.session_affinity,
        s.affinity_timeout_seconds, s.internal_traffic_policy, s.external_traffic_policy,
        s.publish_not_ready_addresses);
  }
  void add(const EndpointSliceInfo& s) { all(s.service_name, s.address_type, s.endpoints, s.ports); }
  void add(const NetworkPolicyInfo& p) {
    all(p.pod_selector, p.policy_ingress, p.policy_egress, p.ingress, p.egress);
  }
};

}  // namespace

uint64_t kubeFingerprint(const KubeObject& o) {
  Fnv f;
  f.all(o.kind, o.ns, o.name);
  std::visit([&](const auto& info) { f.add(info); }, o.info);
  return f.h;
}

}  // namespace dpu::control
