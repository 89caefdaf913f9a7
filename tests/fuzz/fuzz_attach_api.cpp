// The dpu-agent's attach API as host-shim and operators reach it: the first
// byte picks method, path and content type, the rest is the body. Each input
// runs against a fresh agent (its own state directory, no attachments yet), so
// the request really reaches attach/detach/reconcile. The router must never
// crash and must answer an HTTP status it means (4xx/5xx with an ApiError, or
// 200), never something outside 200..599.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "control_test_util.h"
#include "control/agent_config.h"
#include "control/api_router.h"

using namespace dpu::control;

namespace {

struct Route {
  const char* method;
  const char* path;
};

constexpr Route kRoutes[] = {
    {"POST", "/v1/attachments"},           {"POST", "/v1/attachments:detach"},
    {"POST", "/v1/attachments:reconcile"}, {"GET", "/v1/attachments"},
    {"GET", "/v1/attachments/"},           {"DELETE", "/v1/attachments/"},
    {"GET", "/v1/health"},                 {"PUT", "/v1/attachments"},
};
constexpr const char* kTypes[] = {"application/x-protobuf", "application/json", "", "text/plain"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t pick = data[0];
  const Route& route = kRoutes[pick & 7];
  std::string type = kTypes[(pick >> 3) & 3];
  std::string accept = (pick & 0x20) ? "application/json" : "";
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string path = route.path;
  // GET/DELETE of one attachment: the body is the id.
  if (path.back() == '/') path += body;

  testing::TempDir dir;
  ModelState model;
  auto agent = testing::readyAgent(dir.path(), model);
  if (!agent) std::abort();
  ApiRouter::Hooks hooks;
  hooks.not_ready_reason = [] { return std::string(); };
  ApiRouter router(*agent, hooks);

  ApiAnswer a = router.handle(ApiRequest{route.method, path, type, accept, body});
  if (a.status < 200 || a.status > 599) std::abort();
  if (a.status >= 400 && a.body.empty()) std::abort();  // every refusal says why
  return 0;
}
