// Configuration documents: every daemon's config file (JSON or YAML) and every
// structured input we must validate field by field (CNI network configs, REST
// bodies in JSON) go through here, so every bad field gets the same kind of
// message: where it is, what is wrong, what is expected.
//
//   FieldReader r(doc, "config");
//   std::string sock = r.str("socket");                    // required
//   uint64_t mtu = r.uint("mtu", 576, 9216, 1500);         // optional, bounded
//   for (auto& pf : r.objects("pfs")) { ... pf.str("name") ... }
//   if (auto done = r.finish(); !done) return done.takeError();  // also refuses unknown keys
//
// A reader records the first error and then returns defaults; check finish().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dpu {

// JSON when the text is JSON, otherwise YAML (1.2 core schema scalars: true/false,
// integers, floats, null; everything else is a string). `origin` names the source
// in messages (a path, "stdin").
Result<nlohmann::json> parseConfigText(std::string_view text, std::string_view origin);
// A stream of documents, as `kubectl apply -f` reads one: YAML documents
// separated by "---", or JSON values one after another (a single object is a
// stream of one). Empty documents are left out.
Result<std::vector<nlohmann::json>> parseConfigDocuments(std::string_view text, std::string_view origin);
// A daemon's config file: as parseConfigText, then ${NAME} in string values
// replaced by the environment variable NAME ($$ for a literal $; an unset
// variable is an error naming the field), so one file serves every node of a
// DaemonSet with per-node values from the downward API.
Result<nlohmann::json> loadConfigFile(const std::string& path);

class FieldReader {
 public:
  // `where` is the path of `object` in messages: "config", "pfs[1]".
  FieldReader(const nlohmann::json& object, std::string where);

  bool ok() const { return state_->error.empty(); }
  const std::string& error() const { return state_->error; }

  bool has(std::string_view key) const;
  // Without a fallback the field is required.
  std::string str(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  uint64_t uint(std::string_view key, uint64_t min, uint64_t max, std::optional<uint64_t> fallback = std::nullopt);
  int64_t integer(std::string_view key, int64_t min, int64_t max, std::optional<int64_t> fallback = std::nullopt);
  double number(std::string_view key, double min, double max, std::optional<double> fallback = std::nullopt);
  bool boolean(std::string_view key, std::optional<bool> fallback = std::nullopt);
  std::vector<std::string> strings(std::string_view key, bool required = false);
  // A nested object (required unless optional=true; an absent optional one reads as {}).
  FieldReader object(std::string_view key, bool optional = false);
  // An array of objects.
  std::vector<FieldReader> objects(std::string_view key, bool required = false);
  // The raw value, for fields with their own syntax; marks the key as known.
  const nlohmann::json* raw(std::string_view key);
  // Accept these keys without reading them (e.g. fields meant for other plugins).
  void ignore(std::initializer_list<std::string_view> keys);

  // Record an error about a field: "<where>.<key>: <message>".
  void fail(std::string_view key, const std::string& message);
  // The first error, or an unknown key (unless allowUnknown) — call once at the end.
  Result<void> finish(bool allow_unknown = false);
  // finish() for a nested reader whose parent reads on: an unknown key (unless
  // allow_unknown) becomes the shared first error, which the parent's finish() returns.
  void close(bool allow_unknown = false);

  std::string pathOf(std::string_view key) const;

 private:
  struct State {
    std::string error;
  };
  FieldReader(const nlohmann::json& object, std::string where, std::shared_ptr<State> state);
  const nlohmann::json* lookup(std::string_view key, bool required);

  const nlohmann::json* object_;
  std::string where_;
  std::shared_ptr<State> state_;
  std::set<std::string, std::less<>> seen_;
  static const nlohmann::json kEmpty;
};

}  // namespace dpu
