#include "src/parallel/job.h"

#include <cstdio>
#include <fstream>
#include <vector>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

class SingleJob final : public Job {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void set_timeout(double seconds) override { timeout_ = seconds; }
  double timeout() const override { return timeout_; }
  void check_same(std::string_view, uint64_t) override {}
  uint64_t from_rank0(uint64_t value) override { return value; }
  std::string text_from_rank0(const std::string& text) override { return text; }
  std::vector<std::string> texts_to_rank0(const std::string& text, double) override { return {text}; }
  void meet(std::string_view, double) override {}
  std::shared_ptr<ggl::ExpertExchange> expert_exchange() override { return nullptr; }
  ExchangeStats exchange_stats() const override { return {}; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  void finish() override {}

 private:
  double timeout_ = 0;
};

}  // namespace

Job& Job::get() {
  static const std::unique_ptr<Job> job = [] {
    std::unique_ptr<Job> mpi = join_mpi_job();
    return mpi ? std::move(mpi) : std::unique_ptr<Job>(std::make_unique<SingleJob>());
  }();
  return *job;
}

uint64_t job_hash(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t file_head_hash(const std::string& path, uint64_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) ggl::fail("{}: cannot open to compare it across ranks", path);
  const auto size = static_cast<uint64_t>(in.tellg());
  std::string head(static_cast<size_t>(std::min(bytes, size)), '\0');
  in.seekg(0);
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size())))
    ggl::fail("{}: cannot read its header to compare it across ranks", path);
  return job_hash(head, job_hash(std::to_string(size)));
}

}  // namespace latte
