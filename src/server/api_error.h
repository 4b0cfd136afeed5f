// An error answered to an HTTP client in OpenAI's shape, with the status it goes out with:
//   {"error": {"message": "...", "type": "invalid_request_error", "code": 400}}
// (`code` is the HTTP status, as llama-server sends it.) Request parsing and the engine throw it;
// the HTTP layer turns it into the response, and the server keeps serving.
#pragma once
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <utility>

namespace latte::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message)
      : std::runtime_error(message), status_(status), type_(std::move(type)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  nlohmann::json to_json() const { return error_body(status_, type_, what()); }

  static nlohmann::json error_body(int status, const std::string& type, const std::string& message) {
    return {{"error", {{"message", message}, {"type", type}, {"code", status}}}};
  }

 private:
  int status_;
  std::string type_;
};

// 400 invalid_request_error with a formatted message.
template <class... Args>
[[noreturn]] void bad_request(fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace latte::server
