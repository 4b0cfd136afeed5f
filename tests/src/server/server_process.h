// The server tests' harness: a real `latte serve` process on a free loopback port (--port 0; the
// port is read from its "listening on" line), the shipped tiny model by default, and the HTTP
// client calls the tests make, each with a timeout so that a hang fails a test instead of CI.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_support.h"

namespace latte::testing {

class ServerProcess {
 public:
  // Starts `latte serve --port 0 ARGS...` (after `launcher`, e.g. mpirun and its flags) and waits
  // (at most 30 s) for it to listen; on failure, port() is 0 and error() says why.
  explicit ServerProcess(std::vector<std::string> args, std::vector<std::string> launcher = {})
      : launched_(!launcher.empty()) {
    int err_pipe[2];
    if (::pipe(err_pipe) != 0) {
      error_ = "pipe failed";
      return;
    }
    args.insert(args.begin(), {latte_binary().string(), "serve", "--port", "0"});
    args.insert(args.begin(), launcher.begin(), launcher.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(err_pipe[1], STDERR_FILENO);
      ::close(err_pipe[0]);
      ::close(err_pipe[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(err_pipe[1]);
    err_fd_ = err_pipe[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{err_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[512];
      const ssize_t n = ::read(err_fd_, buf, sizeof buf);
      if (n <= 0) break;  // exited
      stderr_.append(buf, static_cast<size_t>(n));
      const size_t at = stderr_.find("listening on http://127.0.0.1:");
      if (at != std::string::npos && stderr_.find(' ', at + 30) != std::string::npos) {
        port_ = std::stoi(stderr_.substr(at + 30));
        return;
      }
    }
    error_ = "latte serve did not start: " + stderr_;
  }

  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      // A launcher killed outright could leave its processes behind: it is asked to end them first.
      if (launched_) {
        ::kill(pid_, SIGTERM);
        if (wait_exit(std::chrono::seconds(20)) != -1 || exited_) {
          close_stderr();
          return;
        }
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    close_stderr();
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }

  httplib::Client client(int read_timeout_s = 60) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(read_timeout_s);
    c.set_write_timeout(10);
    return c;
  }

  // Waits for the process to end, at most `limit`; its exit code, or -1 when it did not end in
  // time (or ended by a signal).
  int wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  void close_stderr() {
    if (err_fd_ >= 0) ::close(err_fd_);
    err_fd_ = -1;
  }

  bool launched_ = false;
  pid_t pid_ = -1;
  int err_fd_ = -1;
  int port_ = 0;
  bool exited_ = false;
  std::string stderr_, error_;
};

// A test suite whose tests share one server, started once with Suite::server_flags() (the flags
// after `latte serve --port 0`): each test fails at once if it did not start.
template <class Suite>
class SharedServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(Suite::server_flags()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << server_->error(); }
  static inline ServerProcess* server_ = nullptr;
};

// A response's status and body (status -1: no response, with httplib's error in body).
struct HttpReply {
  int status = -1;
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

inline HttpReply http_post(httplib::Client& c, const std::string& path, const std::string& body,
                           const httplib::Headers& headers = {}) {
  auto r = c.Post(path, headers, body, "application/json");
  if (!r) return {-1, httplib::to_string(r.error())};
  return {r->status, r->body};
}

inline HttpReply http_get(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  auto r = c.Get(path, headers);
  if (!r) return {-1, httplib::to_string(r.error())};
  return {r->status, r->body};
}

// A streamed (server-sent events) response, parsed: every `data:` event's JSON, and whether
// `data: [DONE]` ended it.
struct EventStreamReply {
  int status = -1;
  std::vector<nlohmann::json> events;
  bool done = false;
  std::string raw;
};

// Posts a request and reads its events as they come; on_event (optional) sees each one and may
// return false to hang up (the client closes the connection).
inline EventStreamReply post_event_stream(httplib::Client& c, const std::string& path, const std::string& body,
                                          const std::function<bool(const nlohmann::json&)>& on_event = {}) {
  EventStreamReply out;
  std::string pending;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    out.raw.append(data, n);
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        out.done = true;
        continue;
      }
      out.events.push_back(nlohmann::json::parse(payload, nullptr, false));
      if (on_event && !on_event(out.events.back())) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  c.send(req, res, error);
  out.status = res.status;
  return out;
}

// Polls `check` every 20 ms until it holds or `limit` passes; whether it held.
inline bool eventually(const std::function<bool()>& check, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  do {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return check();
}

// The value of a metric in Prometheus text (-1 when absent).
inline double metric_value(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() - 1));
}

}  // namespace latte::testing
