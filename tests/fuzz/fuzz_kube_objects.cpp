// Fuzz target for the Kubernetes object decoder (control/kube_objects.h): the
// API server's JSON is untrusted. The first byte picks the kind and whether the
// rest is one object, a list page, a watch event line or a JSON document stream
// (dpu-agent --decode; YAML streams are yaml-cpp's, outside this target). Anything decoded
// without an error must be self-consistent: an object that decodes also
// decodes the same way when fed again (the fingerprint is stable).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "control/kube_objects.h"

using namespace dpu::control;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto kind = static_cast<ObjectKind>(data[0] % kObjectKindCount);
  int mode = (data[0] / kObjectKindCount) % 4;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode == 0) {
    auto r = parseKubeObject(kind, text);
    if (r.ok()) {
      check(r->ok());
      auto again = parseKubeObject(kind, text);
      check(again.ok() && kubeFingerprint(*again) == kubeFingerprint(*r));
    }
  } else if (mode == 1) {
    uint64_t n = 0;
    auto r = parseKubeList(kind, text, [&](KubeObject&& o) {
      ++n;
      if (o.ok()) (void)kubeFingerprint(o);
      (void)o.describe();
    });
    if (r.ok()) check(r->items == n);
  } else if (mode == 3) {
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
      auto docs = decodeKubeDocuments(text, "fuzz");
      if (docs.ok())
        for (const auto& d : *docs) {
          (void)d.object.describe();
          if (d.object.ok()) (void)toJson(d.object).dump();
        }
    }
  } else {
    auto r = parseKubeWatchEvent(kind, text);
    if (r.ok() && r->type != KubeWatchEvent::Type::kError && r->type != KubeWatchEvent::Type::kBookmark &&
        r->object.ok() && r->type != KubeWatchEvent::Type::kDeleted)
      (void)kubeFingerprint(r->object);
  }
  (void)parseKubeStatus(text);
  return 0;
}
