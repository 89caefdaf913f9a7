// JSON/YAML loading and field-by-field validation (see config_doc.h).
#include "common/config_doc.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "common/atomic_file.h"

namespace dpu {
namespace {

using nlohmann::json;

const char* typeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "a value of another type";
  }
}

json scalarFromYaml(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  static const std::regex kInt(R"(^[-+]?[0-9]+$)");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (std::regex_match(s, kInt)) {
    try {
      if (s[0] == '-') return std::stoll(s);
      return std::stoull(s[0] == '+' ? s.substr(1) : s);
    } catch (...) {
      return s;
    }
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (...) {
      return s;
    }
  }
  return s;
}

json fromYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = fromYaml(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(fromYaml(item));
      return out;
    }
    case YAML::NodeType::Scalar: return scalarFromYaml(node);
    default: return nullptr;
  }
}

}  // namespace

Result<json> parseConfigText(std::string_view text, std::string_view origin) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    try {
      return json::parse(text);
    } catch (const json::exception& e) {
      // Not only parse_error: a number too large for a double is out_of_range.
      return Error{std::string(origin) + " is not valid JSON: " + e.what()};
    }
  }
  try {
    YAML::Node node = YAML::Load(std::string(text));
    return fromYaml(node);
  } catch (const YAML::Exception& e) {
    return Error{std::string(origin) + " is not valid YAML or JSON: " + e.what()};
  }
}

Result<std::vector<json>> parseConfigDocuments(std::string_view text, std::string_view origin) {
  std::vector<json> out;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return out;
  if (text[first] == '{' || text[first] == '[') {
    // One JSON value after another: operator>> stops after each.
    std::istringstream in{std::string(text)};
    for (size_t n = 1; (in >> std::ws).peek() != std::char_traits<char>::eof(); ++n) {
      json doc;
      try {
        in >> doc;
      } catch (const json::exception& e) {
        return Error{std::string(origin) + " is not valid JSON (value " + std::to_string(n) + "): " + e.what()};
      }
      out.push_back(std::move(doc));
    }
    return out;
  }
  try {
    for (const YAML::Node& node : YAML::LoadAll(std::string(text))) {
      json doc = fromYaml(node);
      if (!doc.is_null()) out.push_back(std::move(doc));
    }
  } catch (const YAML::Exception& e) {
    return Error{std::string(origin) + " is not valid YAML or JSON: " + e.what()};
  }
  return out;
}

namespace {

// ${NAME} in a string value becomes the environment variable NAME ($$ is a
// literal $). Values only, after parsing: an environment variable cannot add
// keys or change the document's structure.
Result<void> expandEnvironment(json& v, const std::string& where) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (auto r = expandEnvironment(it.value(), where.empty() ? it.key() : where + "." + it.key()); !r) return r;
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      if (auto r = expandEnvironment(v[i], where + "[" + std::to_string(i) + "]"); !r) return r;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.find('$') == std::string::npos) return {};
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '$') {
        out += '$';
        ++i;
      } else if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '{') {
        size_t end = s.find('}', i);
        std::string name = end == std::string::npos ? "" : s.substr(i + 2, end - i - 2);
        static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]*$");
        if (!std::regex_match(name, kName))
          return Error{"config." + where + ": '" + s + "' has a malformed ${NAME} reference", ErrorCode::kInvalid};
        const char* value = std::getenv(name.c_str());
        if (value == nullptr)
          return Error{"config." + where + ": the environment variable " + name + " is not set (the value is '" + s +
                           "'; in a pod, set it from the downward API)",
                       ErrorCode::kInvalid};
        out += value;
        i = end;
      } else {
        out += s[i];
      }
    }
    v = out;
  }
  return {};
}

}  // namespace

Result<json> loadConfigFile(const std::string& path) {
  auto text = readFile(path);
  if (!text) return std::move(text).takeError();
  auto doc = parseConfigText(*text, path);
  if (!doc) return doc;
  if (auto r = expandEnvironment(*doc, ""); !r) return Error{path + ": " + r.error(), ErrorCode::kInvalid};
  return doc;
}

namespace {
// A value in a message: invalid UTF-8 in a config string is shown replaced, never thrown.
std::string shown(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace

const json FieldReader::kEmpty = json::object();

FieldReader::FieldReader(const json& object, std::string where)
    : FieldReader(object, std::move(where), std::make_shared<State>()) {}

FieldReader::FieldReader(const json& object, std::string where, std::shared_ptr<State> state)
    : object_(&object), where_(std::move(where)), state_(std::move(state)) {
  if (!object_->is_object() && state_->error.empty()) {
    state_->error = where_ + " must be an object, not " + typeName(*object_);
    object_ = &kEmpty;
  }
}

std::string FieldReader::pathOf(std::string_view key) const {
  if (where_.empty()) return std::string(key);
  return where_ + "." + std::string(key);
}

void FieldReader::fail(std::string_view key, const std::string& message) {
  if (state_->error.empty()) state_->error = pathOf(key) + ": " + message;
}

bool FieldReader::has(std::string_view key) const {
  return object_->contains(key) && !(*object_)[std::string(key)].is_null();
}

const json* FieldReader::lookup(std::string_view key, bool required) {
  seen_.emplace(key);
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) {
    if (required) fail(key, "is required");
    return nullptr;
  }
  return &*it;
}

std::string FieldReader::str(std::string_view key, std::optional<std::string> fallback) {
  const json* v = lookup(key, !fallback.has_value());
  if (!v) return fallback.value_or("");
  if (!v->is_string()) {
    fail(key, std::string("must be a string, not ") + typeName(*v));
    return fallback.value_or("");
  }
  return v->get<std::string>();
}

uint64_t FieldReader::uint(std::string_view key, uint64_t min, uint64_t max, std::optional<uint64_t> fallback) {
  const json* v = lookup(key, !fallback.has_value());
  if (!v) return fallback.value_or(min);
  if (!v->is_number_integer() || (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)) {
    fail(key, std::string("must be an integer between ") + std::to_string(min) + " and " + std::to_string(max) +
                  ", not " + (v->is_number() ? shown(*v) : typeName(*v)));
    return fallback.value_or(min);
  }
  uint64_t x = v->get<uint64_t>();
  if (x < min || x > max) {
    fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " +
                  std::to_string(x));
    return fallback.value_or(min);
  }
  return x;
}

int64_t FieldReader::integer(std::string_view key, int64_t min, int64_t max, std::optional<int64_t> fallback) {
  const json* v = lookup(key, !fallback.has_value());
  if (!v) return fallback.value_or(min);
  if (!v->is_number_integer()) {
    fail(key, std::string("must be an integer, not ") + typeName(*v));
    return fallback.value_or(min);
  }
  int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                  ? INT64_MAX
                  : v->get<int64_t>();
  if (x < min || x > max) {
    fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " + shown(*v));
    return fallback.value_or(min);
  }
  return x;
}

double FieldReader::number(std::string_view key, double min, double max, std::optional<double> fallback) {
  const json* v = lookup(key, !fallback.has_value());
  if (!v) return fallback.value_or(min);
  if (!v->is_number()) {
    fail(key, std::string("must be a number, not ") + typeName(*v));
    return fallback.value_or(min);
  }
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " + shown(*v));
    return fallback.value_or(min);
  }
  return x;
}

bool FieldReader::boolean(std::string_view key, std::optional<bool> fallback) {
  const json* v = lookup(key, !fallback.has_value());
  if (!v) return fallback.value_or(false);
  if (!v->is_boolean()) {
    fail(key, std::string("must be true or false, not ") + (v->is_primitive() ? shown(*v) : typeName(*v)));
    return fallback.value_or(false);
  }
  return v->get<bool>();
}

std::vector<std::string> FieldReader::strings(std::string_view key, bool required) {
  std::vector<std::string> out;
  const json* v = lookup(key, required);
  if (!v) return out;
  if (!v->is_array()) {
    fail(key, std::string("must be a list of strings, not ") + typeName(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      fail(std::string(key) + "[" + std::to_string(i) + "]", std::string("must be a string, not ") + typeName((*v)[i]));
      return {};
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

FieldReader FieldReader::object(std::string_view key, bool optional) {
  const json* v = lookup(key, !optional);
  if (!v) return FieldReader(kEmpty, pathOf(key), state_);
  return FieldReader(*v, pathOf(key), state_);
}

std::vector<FieldReader> FieldReader::objects(std::string_view key, bool required) {
  std::vector<FieldReader> out;
  const json* v = lookup(key, required);
  if (!v) return out;
  if (!v->is_array()) {
    fail(key, std::string("must be a list of objects, not ") + typeName(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    out.push_back(FieldReader((*v)[i], pathOf(key) + "[" + std::to_string(i) + "]", state_));
  }
  return out;
}

const json* FieldReader::raw(std::string_view key) { return lookup(key, false); }

void FieldReader::ignore(std::initializer_list<std::string_view> keys) {
  for (auto k : keys) seen_.emplace(k);
}

Result<void> FieldReader::finish(bool allow_unknown) {
  if (!state_->error.empty()) return Error{state_->error};
  if (!allow_unknown) {
    for (const auto& [key, value] : object_->items()) {
      if (!seen_.count(key)) {
        std::string known;
        for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
        return Error{pathOf(key) + ": unknown field (known fields: " + known + ")"};
      }
    }
  }
  return {};
}

void FieldReader::close(bool allow_unknown) {
  auto done = finish(allow_unknown);
  if (!done && state_->error.empty()) state_->error = done.error();
}

}  // namespace dpu
