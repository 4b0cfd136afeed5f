// The MPI job (Open MPI): its ranks, meeting points that fail after a timeout instead of hanging,
// and the expert exchange between the ranks (mpi_expert_exchange.h). Compiled only in a build
// with MPI.
#pragma once
#include <mpi.h>

#include <memory>
#include <span>
#include <string_view>

#include "src/parallel/job.h"

namespace latte {

class MpiExpertExchange;

class MpiJob final : public Job {
 public:
  MpiJob();  // MPI_Init_thread; only rank 0 keeps its stdout
  ~MpiJob() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void set_timeout(double seconds) override { timeout_ = seconds; }
  double timeout() const override { return timeout_; }
  void check_same(std::string_view what, uint64_t value) override;
  uint64_t from_rank0(uint64_t value) override;
  std::string text_from_rank0(const std::string& text) override;
  std::vector<std::string> texts_to_rank0(const std::string& text, double timeout) override;
  void meet(std::string_view what, double timeout) override;
  std::shared_ptr<ggl::ExpertExchange> expert_exchange() override;
  ExchangeStats exchange_stats() const override;
  [[noreturn]] void abort(int code) override;
  void finish() override;

  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  // Waits for requests[i] (peers[i]: the rank on the other end, or -1 for a collective), making
  // MPI progress, spinning briefly and then sleeping between polls so that ranks sharing cores
  // leave them to the others. Throws ggl::Error after `timeout` seconds naming `what` and the ranks
  // not heard from.
  void wait(std::span<MPI_Request> requests, std::span<const int> peers, std::string_view what, double timeout) const;

 private:
  // Rank 0's `count` values of `type` at `data`, on every rank (waiting as wait() does).
  void from_rank0(void* data, int count, MPI_Datatype type, std::string_view what, double timeout) const;

  int rank_ = 0;
  int size_ = 1;
  double timeout_ = 60;
  bool finished_ = false;
  std::shared_ptr<MpiExpertExchange> exchange_;
};

}  // namespace latte
