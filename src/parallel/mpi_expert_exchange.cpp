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

void MpiExpertExchange::exchange(ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed,
                                 int64_t n_expert) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const int me = job_.rank(), ranks = job_.size();
  const int64_t D = rows.ne[0], k = ids.ne[0], T = ids.ne[1];
  const ggl::ExpertRange mine = rank_experts(n_expert, me, ranks);
  if (computed.first != mine.first || computed.end != mine.end)
    ggl::fail("rank {}: the graph computed experts [{}, {}) but the rank holds [{}, {})", me, computed.first,
              computed.end, mine.first, mine.end);
  ++stats_.exchanges;

  // Which rank computed each row (slot i of token t is row i + k t), and the routing's hash.
  std::vector<int> owner(static_cast<size_t>(k * T));
  std::vector<uint32_t> count(static_cast<size_t>(ranks), 0);
  uint64_t routing = job_hash(std::string_view(reinterpret_cast<const char*>(&n_expert), sizeof n_expert));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* row_ids = ids.i32_row(t);
    routing = job_hash(std::string_view(reinterpret_cast<const char*>(row_ids), static_cast<size_t>(k) * 4), routing);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = row_ids[i];
      if (e < 0 || e >= n_expert) ggl::fail("rank {}: expert id {} of token {} is not one of {}", me, e, t, n_expert);
      const int r = expert_owner(e, n_expert, ranks);
      owner[static_cast<size_t>(i + k * t)] = r;
      ++count[static_cast<size_t>(r)];
    }
  }
  const size_t row_floats = static_cast<size_t>(D);
  const auto row = [&](size_t j) { return reinterpret_cast<float*>(rows.bytes()) + j * row_floats; };

  // One message for every other rank: the header, then this rank's rows in row order.
  const Header mine_header{routing, count[static_cast<size_t>(me)], 0};
  send_.resize(kHeader + mine_header.rows * row_floats);
  std::memcpy(send_.data(), &mine_header, sizeof mine_header);
  float* out = send_.data() + kHeader;
  for (size_t j = 0; j < owner.size(); ++j)
    if (owner[j] == me) {
      std::memcpy(out, row(j), row_floats * sizeof(float));
      out += row_floats;
    }

  receive_.resize(static_cast<size_t>(ranks));
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    std::vector<float>& in = receive_[static_cast<size_t>(r)];
    in.resize(kHeader + count[static_cast<size_t>(r)] * row_floats);
    requests.emplace_back();
    peers.push_back(r);
    MPI_Irecv(in.data(), static_cast<int>(in.size()), MPI_FLOAT, r, kTag, job_.comm(), &requests.back());
  }
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    requests.emplace_back();
    peers.push_back(r);
    MPI_Isend(send_.data(), static_cast<int>(send_.size()), MPI_FLOAT, r, kTag, job_.comm(), &requests.back());
  }
  job_.wait(requests, peers, fmt::format("expert exchange {}", stats_.exchanges), job_.timeout());

  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    const std::vector<float>& in = receive_[static_cast<size_t>(r)];
    Header h{};
    std::memcpy(&h, in.data(), sizeof h);
    if (h.routing != routing || h.rows != count[static_cast<size_t>(r)])
      ggl::fail(
          "rank {}: rank {} routed the tokens of expert exchange {} differently: the ranks diverged (were they "
          "given the same options and seed?)",
          me, r, stats_.exchanges);
    const float* from = in.data() + kHeader;
    for (size_t j = 0; j < owner.size(); ++j)
      if (owner[j] == r) {
        std::memcpy(row(j), from, row_floats * sizeof(float));
        from += row_floats;
      }
    stats_.bytes_received += in.size() * sizeof(float);
  }
  stats_.bytes_sent += send_.size() * sizeof(float) * static_cast<size_t>(ranks - 1);
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace latte
