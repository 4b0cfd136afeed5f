#include "src/parallel/mpi_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/parallel/mpi_expert_exchange.h"

namespace latte {
namespace {

// mpirun (Open MPI's, or another PMI launcher's) says so in the environment, with the job's size.
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

void check(int status, std::string_view what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  ggl::fail("MPI: {} failed: {}", what, std::string_view(text, static_cast<size_t>(length)));
}

}  // namespace

std::unique_ptr<Job> join_mpi_job() {
  if (launched_size() < 1) return nullptr;
  return std::make_unique<MpiJob>();
}

MpiJob::MpiJob() {
  int provided = 0;
  // One thread at a time calls MPI: the one that runs the graphs (OpenMP's thread 0 runs the
  // exchange nodes), which is the main thread, or a server's engine thread while the main thread
  // serves HTTP.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) ggl::fail("MPI: this MPI library cannot be called from more than one thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors as ggl::Error, not an abort without a word
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (rank_ != 0) {  // the ranks compute the same tokens: one output
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      std::fflush(stdout);
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
}

MpiJob::~MpiJob() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiJob::wait(std::span<MPI_Request> requests, std::span<const int> peers, std::string_view what,
                  double timeout) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), what);
    if (done) return;
    if (std::chrono::duration<double>(Clock::now() - start).count() > timeout) {
      std::set<int> late;  // the ranks whose requests are still open (-1: a collective's)
      for (size_t i = 0; i < requests.size(); ++i) {
        int finished = 0;
        MPI_Test(&requests[i], &finished, MPI_STATUS_IGNORE);
        if (!finished) late.insert(peers[i]);
      }
      if (late.empty()) return;  // (this process itself was held up: it all arrived meanwhile)
      std::string names;
      for (const int r : late)
        names += (names.empty() ? "" : ", ") + (r < 0 ? "the others" : fmt::format("rank {}", r));
      ggl::fail("rank {}: {}: nothing from {} within {:g} s (--mpi-timeout): a rank died or hangs", rank_, what, names,
                timeout);
    }
    // Spin first (an exchange between busy ranks takes microseconds), then give the core away.
    if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 200 : 20));
  }
}

void MpiJob::check_same(std::string_view what, uint64_t value) {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm(), &r), "comparing the ranks");
  const int anyone = -1;
  wait({&r, 1}, {&anyone, 1}, fmt::format("comparing {}", what), timeout_);
  for (int i = 1; i < size_; ++i)
    if (all[static_cast<size_t>(i)] != all[0])
      ggl::fail("rank {} was given {} other than rank 0's: every rank must run the same command on the same file", i,
                what);
}

void MpiJob::from_rank0(void* data, int count, MPI_Datatype type, std::string_view what, double timeout) const {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Ibcast(data, count, type, 0, comm(), &r), "broadcasting from rank 0");
  const int root = 0;
  wait({&r, 1}, {&root, 1}, what, timeout);
}

uint64_t MpiJob::from_rank0(uint64_t value) {
  from_rank0(&value, 1, MPI_UINT64_T, "waiting for rank 0's value", timeout_);
  return value;
}

std::string MpiJob::text_from_rank0(const std::string& text) {
  const double forever = std::numeric_limits<double>::infinity();
  uint64_t size = text.size();
  from_rank0(&size, 1, MPI_UINT64_T, "waiting for rank 0's input", forever);
  std::string out = rank_ == 0 ? text : std::string(size, '\0');
  if (size > 0) from_rank0(out.data(), static_cast<int>(size), MPI_CHAR, "waiting for rank 0's input", forever);
  return out;
}

std::vector<std::string> MpiJob::texts_to_rank0(const std::string& text, double timeout) {
  const int anyone = -1;
  uint64_t size = text.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(size_));
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Igather(&size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, 0, comm(), &r), "gathering on rank 0");
  wait({&r, 1}, {&anyone, 1}, "gathering the ranks' reports", timeout);
  std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  size_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    counts[i] = static_cast<int>(sizes[i]);
    offsets[i] = static_cast<int>(total);
    total += sizes[i];
  }
  std::string all(rank_ == 0 ? total : 0, '\0');
  check(MPI_Igatherv(text.data(), static_cast<int>(size), MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR,
                     0, comm(), &r),
        "gathering on rank 0");
  wait({&r, 1}, {&anyone, 1}, "gathering the ranks' reports", timeout);
  std::vector<std::string> out;
  if (rank_ == 0)
    for (size_t i = 0; i < sizes.size(); ++i) out.push_back(all.substr(static_cast<size_t>(offsets[i]), sizes[i]));
  return out;
}

void MpiJob::meet(std::string_view what, double timeout) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm(), &r), what);
  const int anyone = -1;
  wait({&r, 1}, {&anyone, 1}, what, timeout);
}

std::shared_ptr<ggl::ExpertExchange> MpiJob::expert_exchange() {
  if (size_ == 1) return nullptr;
  if (!exchange_) exchange_ = std::make_shared<MpiExpertExchange>(*this);
  return exchange_;
}

ExchangeStats MpiJob::exchange_stats() const { return exchange_ ? exchange_->stats() : ExchangeStats{}; }

void MpiJob::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // (MPI_Abort does not return)
}

void MpiJob::finish() {
  if (finished_) return;
  finished_ = true;
  std::fflush(stdout);
  MPI_Finalize();
}

}  // namespace latte
