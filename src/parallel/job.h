// The processes one latte command runs on (docs/scale-out.md): the ranks of an MPI job when
// started by `mpirun -np N latte ...` in a build with Open MPI, else this process alone. Ranks run
// the same command on the same tokens in step; each holds a share of the routed experts and they
// meet at every MoE layer (expert_exchange). Only rank 0 writes to stdout and prints notes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/backend/expert_exchange.h"

namespace latte {

// What a rank's expert exchange did: its share of the traffic and the time it spent there.
struct ExchangeStats {
  int64_t exchanges = 0;  // expert_exchange nodes run (one per MoE layer and step)
  int64_t gathers = 0;    // token_gather nodes run (data parallelism: one per MoE layer and step)
  int64_t pairs = 0;      // routed (slot, token) pairs of the exchanges
  int64_t own_pairs = 0;  // of those, the ones this rank's experts computed
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
  double seconds = 0;       // meeting the others: packing, sending, and waiting for their tokens and rows
  double wait_seconds = 0;  // of those, waiting at the receipts (after the nodes between send and receipt)
  ExchangeStats since(const ExchangeStats& e) const {
    return {exchanges - e.exchanges, gathers - e.gathers,          pairs - e.pairs,
            own_pairs - e.own_pairs, bytes_sent - e.bytes_sent,    bytes_received - e.bytes_received,
            seconds - e.seconds,     wait_seconds - e.wait_seconds};
  }
};

class Job {
 public:
  // This process's job, joined on first use: the MPI job when mpirun started the process (its
  // environment says so) and this build has MPI, else a job of one. Throws ggl::Error when mpirun
  // started it and this build has no MPI (every rank would run the whole model alone).
  static Job& get();
  virtual ~Job() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool alone() const { return size() == 1; }

  // How long a rank waits for the others at a meeting point before it calls the job failed: a
  // rank that died or hangs ends the job with an error instead of a silent hang (--mpi-timeout).
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;

  // Throws ggl::Error on every rank when the ranks' values differ (rank 0's line names the first
  // rank that differs and `what`): the same options, the same model file.
  virtual void check_same(std::string_view what, uint64_t value) = 0;
  // Rank 0's value, on every rank (a seed drawn at random).
  virtual uint64_t from_rank0(uint64_t value) = 0;
  // Rank 0's text, on every rank (chat's input). Waits as long as rank 0 takes (its user may be
  // typing); a rank that dies meanwhile still ends the job (mpirun does).
  virtual std::string text_from_rank0(const std::string& text) = 0;
  // Every rank's text on rank 0, in rank order (the others get nothing), waiting `timeout` seconds
  // for them (a server's ranks reporting a step).
  virtual std::vector<std::string> texts_to_rank0(const std::string& text, double timeout) = 0;
  // Waits until every rank got here (or fails after `timeout` seconds, naming `what`).
  virtual void meet(std::string_view what, double timeout) = 0;
  // The rows of the other ranks' experts (nullptr alone), and what it did so far.
  virtual std::shared_ptr<ggl::ExpertExchange> expert_exchange() = 0;
  virtual ExchangeStats exchange_stats() const = 0;

  // Ends every rank's process at once with exit code `code`, after this rank's error was printed.
  [[noreturn]] virtual void abort(int code) = 0;
  // Leaves the job at the end of a command that succeeded on this rank.
  virtual void finish() = 0;
};

// FNV-1a over bytes, for check_same.
uint64_t job_hash(std::string_view bytes, uint64_t seed = 14695981039346656037ull);
// job_hash of a file's first `bytes` bytes and its size (a GGUF file's header and tensor table:
// data_offset()); throws ggl::Error when it cannot be read.
uint64_t file_head_hash(const std::string& path, uint64_t bytes);

// The MPI job of an MPI build when mpirun started this process, else nullptr (mpi_job.cpp, or
// no_mpi_job.cpp in a build without MPI).
std::unique_ptr<Job> join_mpi_job();

}  // namespace latte
