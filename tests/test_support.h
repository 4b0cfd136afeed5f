// Helpers shared by the test suites: locating ../shared and running the latte binary.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace latte::testing {

// The one setting for ../shared: the LATTE_SHARED environment variable, else the CMake option.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("LATTE_SHARED")) return env;
  return LATTE_SHARED_DIR;
}

inline std::filesystem::path latte_binary() { return LATTE_BINARY; }
inline std::filesystem::path test_data_dir() { return LATTE_TEST_DATA_DIR; }

}  // namespace latte::testing

// Skips the current test, loudly, when a file from ../shared is absent.
#define LATTE_REQUIRE_SHARED(relpath)                                                     \
  do {                                                                                    \
    if (!std::filesystem::exists(::latte::testing::shared_dir() / (relpath)))             \
      GTEST_SKIP() << "SKIPPED: shared file missing: "                                    \
                   << (::latte::testing::shared_dir() / (relpath)).string()               \
                   << " (set LATTE_SHARED or -DLATTE_SHARED_DIR)";                        \
  } while (0)
