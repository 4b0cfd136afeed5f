// Helpers shared by the test suites: locating ../shared and running the latte binary.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

namespace latte::testing {

// The one setting for ../shared: the LATTE_SHARED environment variable, else the CMake option.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("LATTE_SHARED")) return env;
  return LATTE_SHARED_DIR;
}

// The test executables sit beside latte in the build's bin/ folder; a cross build's tests start it
// through latte-emulated there, which runs it under the same emulator (tests/CMakeLists.txt).
inline std::filesystem::path bin_dir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }
inline std::filesystem::path latte_target_binary() { return bin_dir() / "latte"; }
inline std::filesystem::path latte_binary() {
  return std::string_view(LATTE_EMULATOR).empty() ? latte_target_binary() : bin_dir() / "latte-emulated";
}
inline std::filesystem::path test_data_dir() { return LATTE_TEST_DATA_DIR; }

// A path in single quotes for a shell command line. Appended piece by piece: GCC 12 warns
// (-Wrestrict, a false positive of its std::string operator+ with a literal on the left) on
// "'" + p.string() + "'", and CI builds with -Werror.
inline std::string shell_quoted(const std::filesystem::path& p) {
  std::string s = "'";
  s += p.string();
  s += '\'';
  return s;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr, interleaved as the shell merges them
  std::string err;  // stderr alone, from run_latte_apart()
};

// Runs a shell command line, capturing its output (stdout and stderr merged, or stdout alone
// with stderr discarded) and exit code.
inline CommandResult run_command(const std::string& command_line, bool merge_stderr = true) {
  CommandResult r;
  FILE* pipe = ::popen((command_line + (merge_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the latte binary with the given arguments (already shell-quoted where needed).
inline CommandResult run_latte(const std::string& args, bool merge_stderr = true) {
  return run_command(latte_binary().string() + " " + args, merge_stderr);
}

// Runs the latte binary with stdout (in out) and stderr (in err) captured apart; stderr goes
// through a temporary file, so the two never block each other.
inline CommandResult run_latte_apart(const std::string& args) {
  static int n = 0;
  const std::filesystem::path err_path = std::filesystem::temp_directory_path() /
                                         ("latte-stderr-" + std::to_string(::getpid()) + "-" + std::to_string(++n));
  CommandResult r =
      run_command("{ " + latte_binary().string() + " " + args + " 2>'" + err_path.string() + "'; }", false);
  if (FILE* f = std::fopen(err_path.c_str(), "rb")) {
    std::array<char, 4096> buf;
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) r.err.append(buf.data(), got);
    std::fclose(f);
  }
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace latte::testing

// A file from ../shared that a test reads: one rule for all of them (LATTE_REQUIRE_SHARED below).
namespace latte::testing {

// Whether a missing shared file fails the test (LATTE_REQUIRE_SHARED=1, as CI sets it) instead of
// skipping it: where ../shared is meant to be present, a test that quietly skips checks nothing.
inline bool shared_files_required() {
  const char* v = std::getenv("LATTE_REQUIRE_SHARED");
  return v != nullptr && std::string_view(v) == "1";
}

// The message naming a shared file that is absent, or nothing when it is there.
inline std::string missing_shared_file(const std::filesystem::path& relpath) {
  const std::filesystem::path path = shared_dir() / relpath;
  if (std::filesystem::exists(path)) return {};
  return "shared file missing: " + path.string() + " (set LATTE_SHARED or -DLATTE_SHARED_DIR)";
}

}  // namespace latte::testing

// Every test that reads a file from ../shared calls this first (in the test body, or in a helper
// returning void): when the file is absent the test is skipped with a message naming it, or fails
// with that message when LATTE_REQUIRE_SHARED=1.
#define LATTE_REQUIRE_SHARED(relpath)                                                  \
  do {                                                                                 \
    const std::string latte_missing_ = ::latte::testing::missing_shared_file(relpath); \
    if (!latte_missing_.empty()) {                                                     \
      if (::latte::testing::shared_files_required()) {                                 \
        FAIL() << latte_missing_ << " (LATTE_REQUIRE_SHARED=1)";                       \
      } else {                                                                         \
        GTEST_SKIP() << "SKIPPED: " << latte_missing_;                                 \
      }                                                                                \
    }                                                                                  \
  } while (0)
