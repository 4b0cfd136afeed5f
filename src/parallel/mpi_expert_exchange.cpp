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

constexpr int kTag = 29;
constexpr size_t kHeader = 4;  // floats: the routing's hash (2 x 32 bits), the row count, unused

struct Header {
  uint64_t routing;
  uint32_t rows;
  uint32_t unused;
};
static_assert(sizeof(Header) == kHeader * sizeof(float));

}  // namespace

void MpiExpertExchange::send(const ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed,
                             int64_t n_expert) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const int me = job_.rank(), ranks = job_.size();
  const int64_t D = rows.ne[0], k = ids.ne[0], T = ids.ne[1];
  const ggl::ExpertRange mine = rank_experts(n_expert, me, ranks);
  if (computed.first != mine.first || computed.end != mine.end)
    ggl::fail("rank {}: the graph computed experts [{}, {}) but the rank holds [{}, {})", me, computed.first,
              computed.end, mine.first, mine.end);
  if (in_flight_) ggl::fail("rank {}: expert rows sent before the last exchange received its own", me);
  ++stats_.exchanges;

  // Which rank computed each row, and the routing's hash. (The expert's owner looked up once per
  // expert, not once per row.)
  if (owner_of_expert_.size() != static_cast<size_t>(n_expert)) {
    owner_of_expert_.resize(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) owner_of_expert_[static_cast<size_t>(e)] = expert_owner(e, n_expert, ranks);
  }
  owner_.assign(static_cast<size_t>(k * T), 0);
  count_.assign(static_cast<size_t>(ranks), 0);
  routing_ = job_hash(std::string_view(reinterpret_cast<const char*>(&n_expert), sizeof n_expert));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* row_ids = ids.i32_row(t);
    routing_ = job_hash(std::string_view(reinterpret_cast<const char*>(row_ids), static_cast<size_t>(k) * 4), routing_);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = row_ids[i];
      if (e < 0 || e >= n_expert) ggl::fail("rank {}: expert id {} of token {} is not one of {}", me, e, t, n_expert);
      const int r = owner_of_expert_[static_cast<size_t>(e)];
      owner_[static_cast<size_t>(i + k * t)] = r;
      ++count_[static_cast<size_t>(r)];
    }
  }

  // One message for every other rank: the header, then this rank's rows in row order.
  const auto row_floats = static_cast<size_t>(D);
  const Header header{routing_, count_[static_cast<size_t>(me)], 0};
  send_.resize(kHeader + header.rows * row_floats);
  std::memcpy(send_.data(), &header, sizeof header);
  float* out = send_.data() + kHeader;
  for (size_t j = 0; j < owner_.size(); ++j)
    if (owner_[j] == me) {
      std::memcpy(out, reinterpret_cast<const float*>(rows.bytes()) + j * row_floats, row_floats * sizeof(float));
      out += row_floats;
    }

  receive_.resize(static_cast<size_t>(ranks));
  requests_.clear();
  peers_.clear();
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    std::vector<float>& in = receive_[static_cast<size_t>(r)];
    in.resize(kHeader + count_[static_cast<size_t>(r)] * row_floats);
    requests_.emplace_back();
    peers_.push_back(r);
    MPI_Irecv(in.data(), static_cast<int>(in.size()), MPI_FLOAT, r, kTag, job_.comm(), &requests_.back());
  }
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    requests_.emplace_back();
    peers_.push_back(r);
    MPI_Isend(send_.data(), static_cast<int>(send_.size()), MPI_FLOAT, r, kTag, job_.comm(), &requests_.back());
  }
  in_flight_ = true;
  stats_.bytes_sent += send_.size() * sizeof(float) * static_cast<size_t>(ranks - 1);
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

void MpiExpertExchange::receive(ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed,
                                int64_t n_expert) {
  (void)ids;  // the routing sent with the rows is the one send() read from them
  (void)computed;
  (void)n_expert;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const int me = job_.rank();
  if (!in_flight_) ggl::fail("rank {}: expert rows received without being sent", me);
  in_flight_ = false;
  job_.wait(requests_, peers_, fmt::format("expert exchange {}", stats_.exchanges), job_.timeout());
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();

  const auto row_floats = static_cast<size_t>(rows.ne[0]);
  for (int r = 0; r < job_.size(); ++r) {
    if (r == me) continue;
    const std::vector<float>& in = receive_[static_cast<size_t>(r)];
    Header h{};
    std::memcpy(&h, in.data(), sizeof h);
    if (h.routing != routing_ || h.rows != count_[static_cast<size_t>(r)])
      ggl::fail(
          "rank {}: rank {} routed the tokens of expert exchange {} differently: the ranks diverged (were they "
          "given the same options and seed?)",
          me, r, stats_.exchanges);
    const float* from = in.data() + kHeader;
    for (size_t j = 0; j < owner_.size(); ++j)
      if (owner_[j] == r) {
        std::memcpy(reinterpret_cast<float*>(rows.bytes()) + j * row_floats, from, row_floats * sizeof(float));
        from += row_floats;
      }
    stats_.bytes_received += in.size() * sizeof(float);
  }
  stats_.wait_seconds += waited;
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace latte
