// Streaming decoder for Kubernetes objects, lists and watch events.
//
// A small JSON reader (JsonReader) emits SAX events; one handler (Decoder)
// walks them with a stack of frames. Each frame carries a
// small state saying where we are inside the object ("spec.ports[]",
// "metadata.labels", ...); the state of a child is chosen from its parent's
// state and the key, so the fields the agent uses are written straight into
// the Info structs and every other subtree is skipped without building
// anything. NetworkPolicy specs are the exception: the policy issue will give
// them a model, until then their JSON text is re-serialized from the events.
#include "control/kube_objects.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <streambuf>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/net_address.h"

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
  kPodStatus,
  kPodIps,
  kPodIpElem,
  kSvcSpec,
  kSvcClusterIps,
  kSvcPorts,
  kSvcPortElem,
  kSliceEndpoints,
  kSliceEndpointElem,
  kSliceAddresses,
  kSliceConditions,
  kSlicePorts,
  kSlicePortElem,
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
  const std::string* raw = nullptr;  // original text of a float
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

constexpr size_t kMaxDepth = 64;

class Decoder {
 public:
  Decoder(Mode mode, ObjectKind kind, const KubeItemSink* sink) : mode_(mode), kind_(kind), sink_(sink) {
    frames_.reserve(16);
  }

  // --- nlohmann SAX interface ---
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
  bool number_float(json::number_float_t val, const json::string_t& s) {
    Scalar v;
    v.t = Scalar::T::kFloat;
    v.d = val;
    v.raw = &s;
    return scalar(v);
  }
  bool string(json::string_t& val) {
    Scalar v;
    v.t = Scalar::T::kStr;
    v.s = &val;
    return scalar(v);
  }
  bool binary(json::binary_t&) {
    fatal_ = "binary values are not JSON";
    return false;
  }
  bool start_object(std::size_t) { return startContainer(false); }
  bool start_array(std::size_t) { return startContainer(true); }
  bool end_object() { return endContainer(); }
  bool end_array() { return endContainer(); }
  bool key(json::string_t& val) {
    Frame& f = frames_.back();
    if (f.state == S::kCapture) {
      if (f.count++) capture_ += ',';
      capture_ += json(val).dump();
      capture_ += ':';
    }
    key_ = val;
    return true;
  }
  void syntaxError(size_t position, const char* what) {
    if (fatal_.empty()) fatal_ = "invalid JSON at byte " + std::to_string(position) + ": " + what;
  }

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
    uint32_t count;
  };

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
        if (parent.array && parent.count++) capture_ += ',';
        capture_ += array ? '[' : '{';
        child = S::kCapture;
      } else if (parent.state == S::kSkip) {
        child = S::kSkip;
      } else {
        child = enter(parent.state, parent.array ? std::string_view() : std::string_view(key_), array);
        if (child == S::kCapture) {
          capture_.clear();
          capture_ += array ? '[' : '{';
          capture_root_ = frames_.size();
        }
      }
    }
    frames_.push_back(Frame{child, array, 0});
    return true;
  }

  bool endContainer() {
    Frame f = frames_.back();
    frames_.pop_back();
    if (f.state == S::kCapture) {
      capture_ += f.array ? ']' : '}';
      if (frames_.size() == capture_root_ && netpol_ != nullptr) netpol_->spec_json = std::move(capture_);
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
      if (f.array && f.count++) capture_ += ',';
      captureScalar(v);
      return true;
    }
    onScalar(f.state, f.array ? std::string_view() : std::string_view(key_), v);
    return true;
  }

  void captureScalar(const Scalar& v) {
    switch (v.t) {
      case Scalar::T::kStr: capture_ += json(*v.s).dump(); break;
      case Scalar::T::kInt: capture_ += std::to_string(v.i); break;
      case Scalar::T::kUint: capture_ += std::to_string(v.u); break;
      case Scalar::T::kFloat: capture_ += *v.raw; break;
      case Scalar::T::kBool: capture_ += v.b ? "true" : "false"; break;
      case Scalar::T::kNull: capture_ += "null"; break;
    }
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
    svc_ = nullptr;
    slice_ = nullptr;
    netpol_ = nullptr;
    pod_cidr_.clear();
    port_keys_text_.clear();
    pod_ip_.clear();
    cluster_ip_.clear();
    switch (kind_) {
      case ObjectKind::kNode: node_ = &object_.info.emplace<NodeInfo>(); break;
      case ObjectKind::kPod: pod_ = &object_.info.emplace<PodInfo>(); break;
      case ObjectKind::kService: svc_ = &object_.info.emplace<ServiceInfo>(); break;
      case ObjectKind::kEndpointSlice: slice_ = &object_.info.emplace<EndpointSliceInfo>(); break;
      case ObjectKind::kNetworkPolicy: netpol_ = &object_.info.emplace<NetworkPolicyInfo>(); break;
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
          switch (kind_) {
            case ObjectKind::kNode: return want("spec", false, S::kNodeSpec);
            case ObjectKind::kPod: return want("spec", false, S::kPodSpec);
            case ObjectKind::kService: return want("spec", false, S::kSvcSpec);
            case ObjectKind::kNetworkPolicy: return want("spec", false, S::kCapture);
            case ObjectKind::kEndpointSlice: return S::kSkip;
          }
        }
        if (key == "status" && kind_ == ObjectKind::kPod) return want("status", false, S::kPodStatus);
        if (kind_ == ObjectKind::kEndpointSlice) {
          if (key == "endpoints") return want("endpoints", true, S::kSliceEndpoints);
          if (key == "ports") return want("ports", true, S::kSlicePorts);
          if (key == "addressType") wrongShape("addressType", false, array ? "an array" : "an object");
        }
        return S::kSkip;
      case S::kMeta:
        if (key == "labels") {
          if (kind_ == ObjectKind::kNode || kind_ == ObjectKind::kPod || kind_ == ObjectKind::kEndpointSlice)
            return want("metadata.labels", false, S::kLabels);
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
            key == kPortKeysAnnotation)
          fail("metadata.annotations[" + std::string(key) + "]: expected a string");
        return S::kSkip;
      case S::kNodeSpec:
        if (key == "podCIDRs") return want("spec.podCIDRs", true, S::kNodePodCidrs);
        if (key == "podCIDR") fail("spec.podCIDR: expected a string");
        return S::kSkip;
      case S::kPodSpec:
        if (key == "nodeName" || key == "hostNetwork") fail("spec." + std::string(key) + ": expected a scalar");
        return S::kSkip;
      case S::kPodStatus:
        if (key == "podIPs") return want("status.podIPs", true, S::kPodIps);
        if (key == "podIP") fail("status.podIP: expected a string");
        return S::kSkip;
      case S::kPodIps:
        if (array) {
          fail("status.podIPs[]: expected an object");
          return S::kSkip;
        }
        return S::kPodIpElem;
      case S::kSvcSpec:
        if (key == "clusterIPs") return want("spec.clusterIPs", true, S::kSvcClusterIps);
        if (key == "ports") return want("spec.ports", true, S::kSvcPorts);
        if (key == "type" || key == "clusterIP" || key == "sessionAffinity")
          fail("spec." + std::string(key) + ": expected a string");
        return S::kSkip;
      case S::kSvcPorts:
        if (array) {
          fail("spec.ports[]: expected an object");
          return S::kSkip;
        }
        svc_->ports.emplace_back();
        return S::kSvcPortElem;
      case S::kSliceEndpoints:
        if (array) {
          fail("endpoints[]: expected an object");
          return S::kSkip;
        }
        slice_->endpoints.emplace_back();
        serving_seen_ = false;
        return S::kSliceEndpointElem;
      case S::kSliceEndpointElem:
        if (key == "addresses") return want("endpoints[].addresses", true, S::kSliceAddresses);
        if (key == "conditions") return want("endpoints[].conditions", false, S::kSliceConditions);
        if (key == "nodeName") fail("endpoints[].nodeName: expected a string");
        return S::kSkip;
      case S::kSlicePorts:
        if (array) {
          fail("ports[]: expected an object");
          return S::kSkip;
        }
        slice_->ports.emplace_back();
        return S::kSlicePortElem;
      case S::kNodePodCidrs:
      case S::kSvcClusterIps:
      case S::kSliceAddresses:
        fail("a list of strings holds " + std::string(array ? "an array" : "an object"));
        return S::kSkip;
      case S::kSvcPortElem:
      case S::kSlicePortElem:
      case S::kPodIpElem:
      case S::kSliceConditions:
        if (!key.empty()) fail(std::string(key) + ": expected a scalar");
        return S::kSkip;
      default:
        return S::kSkip;
    }
  }

  void leave(S state) {
    if (state == S::kObj) {
      finishObject();
    } else if (state == S::kSliceEndpointElem && slice_ != nullptr && !slice_->endpoints.empty()) {
      // EndpointConditions: a nil serving means "same as ready".
      if (!serving_seen_) slice_->endpoints.back().serving = slice_->endpoints.back().ready;
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
        } else if (key == "addressType" && slice_ != nullptr) {
          str(v, slice_->address_type, "addressType");
        } else if ((key == "metadata" || key == "spec") && v.t != Scalar::T::kNull) {
          fail(std::string(key) + ": expected an object, got " + typeName(v));
        } else if (kind_ == ObjectKind::kEndpointSlice && (key == "endpoints" || key == "ports") &&
                   v.t != Scalar::T::kNull) {
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
        if (node_ != nullptr) {
          node_->labels.emplace(std::string(key), std::move(*v.s));
        } else if (pod_ != nullptr) {
          pod_->labels.emplace(std::string(key), std::move(*v.s));
        } else if (slice_ != nullptr && key == "kubernetes.io/service-name") {
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
        return;
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
      case S::kSvcSpec:
        if (key == "type") {
          str(v, svc_->type, "spec.type");
        } else if (key == "clusterIP") {
          str(v, cluster_ip_, "spec.clusterIP");
        } else if (key == "sessionAffinity") {
          str(v, svc_->session_affinity, "spec.sessionAffinity");
        } else if ((key == "ports" || key == "clusterIPs") && v.t != Scalar::T::kNull) {
          fail("spec." + std::string(key) + ": expected an array, got " + typeName(v));
        }
        return;
      case S::kSvcClusterIps: {
        std::string s;
        if (str(v, s, "spec.clusterIPs[]")) svc_->cluster_ips.push_back(std::move(s));
        return;
      }
      case S::kSvcPorts:
        fail("spec.ports[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kSvcPortElem: {
        ServicePort& p = svc_->ports.back();
        if (key == "name") {
          str(v, p.name, "spec.ports[].name");
        } else if (key == "protocol") {
          str(v, p.protocol, "spec.ports[].protocol");
        } else if (key == "port") {
          port(v, p.port, "spec.ports[].port", false);
        } else if (key == "nodePort") {
          port(v, p.node_port, "spec.ports[].nodePort", true);
        } else if (key == "targetPort") {
          if (v.t == Scalar::T::kStr) {
            if (v.s->empty()) fail("spec.ports[].targetPort: empty name");
            p.target_port = std::move(*v.s);
          } else if (v.t != Scalar::T::kNull) {
            uint16_t n = 0;
            if (port(v, n, "spec.ports[].targetPort", false)) p.target_port = std::to_string(n);
          }
        }
        return;
      }
      case S::kSliceEndpoints:
        fail("endpoints[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kSliceEndpointElem:
        if (key == "nodeName") str(v, slice_->endpoints.back().node_name, "endpoints[].nodeName");
        if ((key == "addresses" || key == "conditions") && v.t != Scalar::T::kNull)
          fail("endpoints[]." + std::string(key) + ": expected a container, got " + typeName(v));
        return;
      case S::kSliceAddresses: {
        std::string s;
        if (str(v, s, "endpoints[].addresses[]")) slice_->endpoints.back().addresses.push_back(std::move(s));
        return;
      }
      case S::kSliceConditions: {
        EndpointInfo& e = slice_->endpoints.back();
        if (key == "ready") {
          boolField(v, e.ready, "endpoints[].conditions.ready", true);
        } else if (key == "serving") {
          // A nil serving means "same as ready" (resolved when the endpoint ends).
          if (v.t != Scalar::T::kNull) serving_seen_ = boolField(v, e.serving, "endpoints[].conditions.serving", true);
        } else if (key == "terminating") {
          boolField(v, e.terminating, "endpoints[].conditions.terminating", false);
        }
        return;
      }
      case S::kSlicePorts:
        fail("ports[]: expected an object, got " + std::string(typeName(v)));
        return;
      case S::kSlicePortElem: {
        EndpointSliceInfo::Port& p = slice_->ports.back();
        if (key == "name") {
          str(v, p.name, "ports[].name");
        } else if (key == "protocol") {
          str(v, p.protocol, "ports[].protocol");
        } else if (key == "port") {
          port(v, p.port, "ports[].port", true);
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
    if (svc_ != nullptr && svc_->cluster_ips.empty() && !cluster_ip_.empty()) svc_->cluster_ips.push_back(cluster_ip_);
    if (mode_ == Mode::kList) {
      page_.items++;
      validateKubeObject(object_, false);
      if (sink_ != nullptr && *sink_) (*sink_)(std::move(object_));
      object_ = KubeObject{};
    }
  }

 public:
  static void validateKubeObject(KubeObject& o, bool name_only);

 private:
  Mode mode_;
  ObjectKind kind_;
  const KubeItemSink* sink_;
  std::vector<Frame> frames_;
  std::string key_;
  std::string capture_;
  size_t capture_root_ = 0;
  bool in_object_ = false;
  bool serving_seen_ = false;
  NodeInfo* node_ = nullptr;
  PodInfo* pod_ = nullptr;
  ServiceInfo* svc_ = nullptr;
  EndpointSliceInfo* slice_ = nullptr;
  NetworkPolicyInfo* netpol_ = nullptr;
  std::string pod_cidr_;
  std::string port_keys_text_;
  std::string pod_ip_;
  std::string cluster_ip_;
};

// A JSON reader that drives the Decoder's SAX interface. nlohmann's lexer
// copies every string byte by byte through its input adapter and was most of
// the time of a 150,000-pod sync; this one appends whole runs of plain string
// bytes at once and reads a contiguous buffer refilled in 64 KiB chunks. It
// accepts exactly RFC 8259 JSON (UTF-8 checked, no comments, no trailing
// commas, nothing after the value).
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

bool namespaced(ObjectKind kind) { return kind != ObjectKind::kNode; }

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

std::string checkProtocol(std::string& protocol, std::string_view field) {
  if (protocol.empty()) protocol = "TCP";
  if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP")
    return std::string(field) + ": '" + protocol + "' is not TCP, UDP or SCTP";
  return {};
}

std::string validateInfo(KubeObject& o) {
  if (o.name.empty()) return "metadata.name is missing";
  if (namespaced(o.kind) && o.ns.empty()) return "metadata.namespace is missing";
  std::string e;
  switch (o.kind) {
    case ObjectKind::kNode: {
      NodeInfo& n = std::get<NodeInfo>(o.info);
      n.name = o.name;
      if (!n.tunnel_ip.empty() && !(e = checkIp(n.tunnel_ip, "annotation dpu-cni.io/tunnel-ip")).empty()) return e;
      for (const auto& c : n.pod_cidrs)
        if (!IpPrefix::parse(c).ok()) return "spec.podCIDRs: '" + c + "' is not a CIDR with the host bits clear";
      return {};
    }
    case ObjectKind::kPod: {
      PodInfo& p = std::get<PodInfo>(o.info);
      p.ns = o.ns;
      p.name = o.name;
      for (const auto& ip : p.ips)
        if (!(e = checkIp(ip, "status.podIPs")).empty()) return e;
      return {};
    }
    case ObjectKind::kService: {
      ServiceInfo& s = std::get<ServiceInfo>(o.info);
      s.ns = o.ns;
      s.name = o.name;
      if (s.type.empty()) s.type = "ClusterIP";
      if (s.type != "ClusterIP" && s.type != "NodePort" && s.type != "LoadBalancer" && s.type != "ExternalName")
        return "spec.type: '" + s.type + "' is not ClusterIP, NodePort, LoadBalancer or ExternalName";
      if (s.session_affinity.empty()) s.session_affinity = "None";
      for (const auto& ip : s.cluster_ips)
        if (ip != "None" && !(e = checkIp(ip, "spec.clusterIPs")).empty()) return e;
      for (auto& p : s.ports) {
        if (p.port == 0) return "spec.ports[].port is missing";
        if (!(e = checkProtocol(p.protocol, "spec.ports[].protocol")).empty()) return e;
        if (p.target_port.empty()) p.target_port = std::to_string(p.port);
      }
      return {};
    }
    case ObjectKind::kEndpointSlice: {
      EndpointSliceInfo& s = std::get<EndpointSliceInfo>(o.info);
      s.ns = o.ns;
      s.name = o.name;
      if (s.address_type != "IPv4" && s.address_type != "IPv6" && s.address_type != "FQDN")
        return "addressType: '" + s.address_type + "' is not IPv4, IPv6 or FQDN";
      for (const auto& ep : s.endpoints) {
        if (ep.addresses.empty()) return "endpoints[].addresses is empty";
        if (s.address_type == "FQDN") continue;
        for (const auto& a : ep.addresses) {
          auto ip = IpAddress::parse(a);
          if (!ip.ok()) return "endpoints[].addresses: '" + a + "' is not an IP address";
          if (ip->isV4() != (s.address_type == "IPv4"))
            return "endpoints[].addresses: '" + a + "' is not of addressType " + s.address_type;
        }
      }
      for (auto& p : s.ports)
        if (!(e = checkProtocol(p.protocol, "ports[].protocol")).empty()) return e;
      return {};
    }
    case ObjectKind::kNetworkPolicy: {
      NetworkPolicyInfo& p = std::get<NetworkPolicyInfo>(o.info);
      p.ns = o.ns;
      p.name = o.name;
      if (p.spec_json.empty()) p.spec_json = "{}";
      return {};
    }
  }
  return {};
}

void Decoder::validateKubeObject(KubeObject& o, bool name_only) {
  if (!o.error.empty()) return;
  if (name_only) {
    if (o.name.empty()) o.error = "metadata.name is missing";
    return;
  }
  o.error = validateInfo(o);
}

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

}  // namespace

const char* kubeKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "Node";
    case ObjectKind::kPod: return "Pod";
    case ObjectKind::kService: return "Service";
    case ObjectKind::kEndpointSlice: return "EndpointSlice";
    case ObjectKind::kNetworkPolicy: return "NetworkPolicy";
  }
  return "Object";
}

std::string KubeObject::describe() const {
  std::string s = kubeKindName(kind);
  s += ' ';
  if (!ns.empty()) s += ns + "/";
  s += name.empty() ? std::string("<unnamed>") : name;
  return s;
}

Result<KubeObject> parseKubeObject(ObjectKind kind, std::string_view text) {
  Decoder d(Mode::kSingle, kind, nullptr);
  if (!runSax(text, d)) return Error{std::string("decoding a ") + kubeKindName(kind) + ": " + d.fatal_};
  Decoder::validateKubeObject(d.object_, false);
  if (!d.object_.ok()) return Error{"malformed " + d.object_.describe() + ": " + d.object_.error};
  return std::move(d.object_);
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
  ev.object = std::move(d.object_);
  if (ev.type == KubeWatchEvent::Type::kBookmark) {
    if (ev.object.resource_version.empty()) return Error{"a BOOKMARK event has no metadata.resourceVersion"};
    ev.object.error.clear();
    return ev;
  }
  Decoder::validateKubeObject(ev.object, ev.type == KubeWatchEvent::Type::kDeleted);
  return ev;
}

KubeStatus parseKubeStatus(std::string_view body) {
  Decoder d(Mode::kList, ObjectKind::kNode, nullptr);
  runSax(body, d);
  if (d.root_kind_ != "Status") return KubeStatus{};
  return d.status_;
}

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= c[i];
      h *= 1099511628211ull;
    }
  }
  // Length-prefixed, so ("ab","c") and ("a","bc") differ.
  void str(const std::string& s) {
    uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  void num(uint64_t v) { bytes(&v, sizeof v); }
  void strs(const std::vector<std::string>& v) {
    num(v.size());
    for (const auto& s : v) str(s);
  }
  void map(const std::map<std::string, std::string>& m) {
    num(m.size());
    for (const auto& [k, v] : m) {
      str(k);
      str(v);
    }
  }
};

}  // namespace

uint64_t kubeFingerprint(const KubeObject& o) {
  Fnv f;
  f.num(static_cast<uint64_t>(o.kind));
  f.str(o.ns);
  f.str(o.name);
  switch (o.kind) {
    case ObjectKind::kNode: {
      const auto& n = std::get<NodeInfo>(o.info);
      f.str(n.tunnel_ip);
      f.strs(n.pod_cidrs);
      f.str(n.ipsec_public_key);
      f.num(n.ipsec_epoch);
      f.map(n.labels);
      f.num(n.port_keys.size());
      for (const auto& [ip, key] : n.port_keys) {
        f.str(ip);
        f.num(key);
      }
      break;
    }
    case ObjectKind::kPod: {
      const auto& p = std::get<PodInfo>(o.info);
      f.str(p.uid);
      f.str(p.node_name);
      f.strs(p.ips);
      f.map(p.labels);
      f.num(p.host_network);
      break;
    }
    case ObjectKind::kService: {
      const auto& s = std::get<ServiceInfo>(o.info);
      f.str(s.type);
      f.strs(s.cluster_ips);
      f.str(s.session_affinity);
      f.num(s.ports.size());
      for (const auto& p : s.ports) {
        f.str(p.name);
        f.str(p.protocol);
        f.num(p.port);
        f.str(p.target_port);
        f.num(p.node_port);
      }
      break;
    }
    case ObjectKind::kEndpointSlice: {
      const auto& s = std::get<EndpointSliceInfo>(o.info);
      f.str(s.service_name);
      f.str(s.address_type);
      f.num(s.endpoints.size());
      for (const auto& e : s.endpoints) {
        f.strs(e.addresses);
        f.num((e.ready ? 1 : 0) | (e.serving ? 2 : 0) | (e.terminating ? 4 : 0));
        f.str(e.node_name);
      }
      f.num(s.ports.size());
      for (const auto& p : s.ports) {
        f.str(p.name);
        f.str(p.protocol);
        f.num(p.port);
      }
      break;
    }
    case ObjectKind::kNetworkPolicy:
      f.str(std::get<NetworkPolicyInfo>(o.info).spec_json);
      break;
  }
  return f.h;
}

}  // namespace dpu::control
