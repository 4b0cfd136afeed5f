// Typed, validated access to a JSON object read from a file (config.json, tokenizer_config.json):
// every missing key or wrong type is one ggl::Error line naming the file and the key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ggml-like/core/error.h"

namespace latte::convert {

// Parses a whole JSON file; errors name the file.
nlohmann::json read_json_file(const std::string& path);

class JsonObject {
 public:
  // `source` names the object in errors (a file name, or "config.json: rope_scaling").
  JsonObject(std::string source, nlohmann::json j);
  static JsonObject load(const std::string& path) { return JsonObject(path, read_json_file(path)); }

  const std::string& source() const { return source_; }
  const nlohmann::json& raw() const { return j_; }

  // True when the key is present with a non-null value.
  bool has(const std::string& key) const;

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  // A nested object (error if missing or not an object).
  JsonObject get_object(const std::string& key) const;

  // Absent or null → std::nullopt; present with the wrong type → error.
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_float(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;

  int64_t int_or(const std::string& key, int64_t fallback) const { return opt_int(key).value_or(fallback); }
  double float_or(const std::string& key, double fallback) const { return opt_float(key).value_or(fallback); }
  bool bool_or(const std::string& key, bool fallback) const { return opt_bool(key).value_or(fallback); }

 private:
  const nlohmann::json& need(const std::string& key) const;
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;

  std::string source_;
  nlohmann::json j_;
};

}  // namespace latte::convert
