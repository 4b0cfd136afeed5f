#include "convert/json_file.h"

#include <cmath>
#include <fstream>

namespace latte::convert {

using nlohmann::json;

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open", path);
  try {
    return json::parse(in);
  } catch (const json::exception& ex) {
    // nlohmann's message is one line; drop its "[json.exception.parse_error.101] " tag.
    std::string what = ex.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    ggl::fail("{}: not valid JSON: {}", path, what);
  }
}

JsonObject::JsonObject(std::string source, json j) : source_(std::move(source)), j_(std::move(j)) {
  if (!j_.is_object()) ggl::fail("{}: expected a JSON object", source_);
}

bool JsonObject::has(const std::string& key) const {
  auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

const json& JsonObject::need(const std::string& key) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) ggl::fail("{}: missing key '{}'", source_, key);
  return *it;
}

void JsonObject::wrong_type(const std::string& key, const char* expected) const {
  ggl::fail("{}: key '{}' is {}, expected {}", source_, key, j_.at(key).type_name(), expected);
}

int64_t JsonObject::get_int(const std::string& key) const {
  const json& v = need(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  // Some exporters write integral values as 4096.0.
  if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
      std::fabs(v.get<double>()) < 9e15)
    return static_cast<int64_t>(v.get<double>());
  wrong_type(key, "an integer");
}

double JsonObject::get_float(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_number()) wrong_type(key, "a number");
  return v.get<double>();
}

bool JsonObject::get_bool(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_boolean()) wrong_type(key, "true or false");
  return v.get<bool>();
}

std::string JsonObject::get_string(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_string()) wrong_type(key, "a string");
  return v.get<std::string>();
}

JsonObject JsonObject::get_object(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_object()) wrong_type(key, "an object");
  return JsonObject(source_ + ": " + key, v);
}

std::optional<int64_t> JsonObject::opt_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}
std::optional<double> JsonObject::opt_float(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}
std::optional<bool> JsonObject::opt_bool(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}
std::optional<std::string> JsonObject::opt_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

}  // namespace latte::convert
