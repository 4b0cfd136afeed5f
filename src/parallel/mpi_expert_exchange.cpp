#include "src/parallel/mpi_expert_exchange.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string_view>

#include "ggml-like/core/error.h"
#include "src/model/expert_share.h"
#include "src/parallel/mpi_job.h"

namespace latte {
namespace {

constexpr int kRowsTag = 29;
constexpr int kTokensTag = 30;
constexpr size_t kHeader = 4;  // floats: the routing's hash (2 x 32 bits), the row count, unused

struct Header {
  uint64_t routing;
  uint32_t rows;
  uint32_t unused;
};
static_assert(sizeof(Header) == kHeader * sizeof(float));

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

void MpiExpertExchange::post_receive(float* to, size_t count, int from, int tag) {
  requests_.emplace_back();
  peers_.push_back(from);
  MPI_Irecv(to, static_cast<int>(count), MPI_FLOAT, from, tag, job_.comm(), &requests_.back());
}

void MpiExpertExchange::post_send(const float* data, size_t count, int to, int tag) {
  requests_.emplace_back();
  peers_.push_back(to);
  MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, to, tag, job_.comm(), &requests_.back());
  stats_.bytes_sent += count * sizeof(float);
}

std::vector<int64_t> MpiExpertExchange::token_counts(int64_t mine) {
  const Clock::time_point start = Clock::now();
  counts_.assign(static_cast<size_t>(job_.size()), 0);
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Iallgather(&mine, 1, MPI_INT64_T, counts_.data(), 1, MPI_INT64_T, job_.comm(), &r);
  const int anyone = -1;
  job_.wait({&r, 1}, {&anyone, 1}, "meeting the ranks' step", job_.timeout());
  stats_.seconds += seconds_since(start);
  return counts_;
}

void MpiExpertExchange::gather(ggl::Tensor& all, int64_t first, int64_t n) {
  const Clock::time_point start = Clock::now();
  const int me = job_.rank();
  int64_t total = 0, at = 0;
  for (int r = 0; r < job_.size(); ++r) {
    if (r == me) at = total;
    total += counts_.empty() ? 0 : counts_[static_cast<size_t>(r)];
  }
  if (counts_.empty() || counts_[static_cast<size_t>(me)] != n || at != first || total != all.ne[1])
    ggl::fail("rank {}: the graph gathers {} tokens at {} of {}, not what the ranks counted", me, n, first, all.ne[1]);
  ++stats_.gathers;
  const auto width = static_cast<size_t>(all.ne[0]);
  requests_.clear();
  peers_.clear();
  int64_t row = 0;
  for (int r = 0; r < job_.size(); ++r) {
    const auto count = static_cast<size_t>(counts_[static_cast<size_t>(r)]);
    if (r != me && count > 0) post_receive(reinterpret_cast<float*>(all.row(row)), count * width, r, kTokensTag);
    row += counts_[static_cast<size_t>(r)];
  }
  for (int r = 0; r < job_.size(); ++r)
    if (r != me && n > 0)
      post_send(reinterpret_cast<const float*>(all.row(first)), static_cast<size_t>(n) * width, r, kTokensTag);
  const Clock::time_point waiting = Clock::now();
  job_.wait(requests_, peers_, fmt::format("gathering the ranks' tokens {}", stats_.gathers), job_.timeout());
  stats_.wait_seconds += seconds_since(waiting);
  stats_.bytes_received += static_cast<size_t>(total - n) * width * sizeof(float);
  stats_.seconds += seconds_since(start);
}

void MpiExpertExchange::send(const ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) {
  const Clock::time_point start = Clock::now();
  const int me = job_.rank(), ranks = job_.size();
  const int64_t D = rows.ne[0], k = ids.ne[0], T = ids.ne[1], n_expert = what.n_expert;
  const ggl::ExpertRange range = rank_experts(n_expert, me, ranks);
  if (what.computed.owner ? what.computed.process != me
                          : what.computed.first != range.first || what.computed.end != range.end)
    ggl::fail("rank {}: the graph computed experts other than the rank's", me);
  if (in_flight_) ggl::fail("rank {}: expert rows sent before the last exchange received its own", me);
  ++stats_.exchanges;

  // Gathered: each token's rank, from the step's counts.
  gathered_ = what.gathered;
  home_.clear();
  if (gathered_) {
    for (int r = 0; r < ranks && r < static_cast<int>(counts_.size()); ++r)
      home_.insert(home_.end(), static_cast<size_t>(counts_[static_cast<size_t>(r)]), r);
    if (static_cast<int64_t>(home_.size()) != T)
      ggl::fail("rank {}: the graph's {} gathered tokens are not the {} the ranks counted", me, T, home_.size());
  }
  const auto needs = [&](int r, int64_t t) { return !gathered_ || home_[static_cast<size_t>(t)] == r; };

  // Which rank computed each row, and the routing's hash. (The expert's owner looked up once per
  // expert, not once per row: the layer's owner table of a split by routing counts, else the
  // contiguous ranges'.)
  owner_of_expert_.resize(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e)
    owner_of_expert_[static_cast<size_t>(e)] =
        what.computed.owner ? what.computed.owner[e] : expert_owner(e, n_expert, ranks);
  owner_.assign(static_cast<size_t>(k * T), 0);
  routing_ = job_hash(std::string_view(reinterpret_cast<const char*>(&n_expert), sizeof n_expert));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* row_ids = ids.i32_row(t);
    routing_ = job_hash(std::string_view(reinterpret_cast<const char*>(row_ids), static_cast<size_t>(k) * 4), routing_);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = row_ids[i];
      if (e < 0 || e >= n_expert) ggl::fail("rank {}: expert id {} of token {} is not one of {}", me, e, t, n_expert);
      owner_[static_cast<size_t>(i + k * t)] = owner_of_expert_[static_cast<size_t>(e)];
      stats_.own_pairs += owner_of_expert_[static_cast<size_t>(e)] == me;
    }
  }
  stats_.pairs += k * T;

  // One message for every other rank: the header, then this rank's rows that rank needs, in row
  // order; and the receipt of its rows this rank needs.
  const auto row_floats = static_cast<size_t>(D);
  send_.resize(static_cast<size_t>(ranks));
  receive_.resize(static_cast<size_t>(ranks));
  incoming_.assign(static_cast<size_t>(ranks), 0);
  requests_.clear();
  peers_.clear();
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    std::vector<float>& out = send_[static_cast<size_t>(r)];
    out.resize(kHeader);
    Header header{routing_, 0, 0};
    for (size_t j = 0; j < owner_.size(); ++j) {
      const int64_t t = static_cast<int64_t>(j) / k;
      if (owner_[j] == me && needs(r, t)) {
        const float* from = reinterpret_cast<const float*>(rows.bytes()) + j * row_floats;
        out.insert(out.end(), from, from + row_floats);
        ++header.rows;
      }
      if (owner_[j] == r && needs(me, t)) ++incoming_[static_cast<size_t>(r)];
    }
    std::memcpy(out.data(), &header, sizeof header);
    std::vector<float>& in = receive_[static_cast<size_t>(r)];
    in.resize(kHeader + incoming_[static_cast<size_t>(r)] * row_floats);
    post_receive(in.data(), in.size(), r, kRowsTag);
  }
  for (int r = 0; r < ranks; ++r)
    if (r != me) post_send(send_[static_cast<size_t>(r)].data(), send_[static_cast<size_t>(r)].size(), r, kRowsTag);
  in_flight_ = true;
  stats_.seconds += seconds_since(start);
}

void MpiExpertExchange::receive(ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) {
  (void)ids;  // the routing sent with the rows is the one send() read from them
  const Clock::time_point start = Clock::now();
  const int me = job_.rank();
  if (!in_flight_) ggl::fail("rank {}: expert rows received without being sent", me);
  if (what.gathered != gathered_) ggl::fail("rank {}: expert rows received otherwise than sent", me);
  in_flight_ = false;
  job_.wait(requests_, peers_, fmt::format("expert exchange {}", stats_.exchanges), job_.timeout());
  const double waited = seconds_since(start);

  const auto row_floats = static_cast<size_t>(rows.ne[0]);
  const int64_t k = ids.ne[0];
  for (int r = 0; r < job_.size(); ++r) {
    if (r == me) continue;
    const std::vector<float>& in = receive_[static_cast<size_t>(r)];
    Header h{};
    std::memcpy(&h, in.data(), sizeof h);
    if (h.routing != routing_ || h.rows != incoming_[static_cast<size_t>(r)])
      ggl::fail(
          "rank {}: rank {} routed the tokens of expert exchange {} differently: the ranks diverged (were they "
          "given the same options and seed?)",
          me, r, stats_.exchanges);
    const float* from = in.data() + kHeader;
    for (size_t j = 0; j < owner_.size(); ++j)
      if (owner_[j] == r && (!gathered_ || home_[j / static_cast<size_t>(k)] == me)) {
        std::memcpy(reinterpret_cast<float*>(rows.bytes()) + j * row_floats, from, row_floats * sizeof(float));
        from += row_floats;
      }
    stats_.bytes_received += in.size() * sizeof(float);
  }
  stats_.wait_seconds += waited;
  stats_.seconds += seconds_since(start);
}

}  // namespace latte
