// The CPU's own copies of a model's matrices (Backend::prepare_weights, backend.h): the offered
// matrices that the kernel set in use multiplies faster with 8 rows interleaved (interleaved.h),
// rewritten once into one buffer; and, while a graph runs, its leaves pointed at those copies.
//
// Which matrices: Q4_0 and Q8_0 ones whose rows come in whole groups of 8 (every matrix of a 3-D
// stack of experts), where the set multiplies their interleaved type; Q6_K only as the output
// head, the one matrix of that type in the common files that every token reads whole (the others,
// some feed-forward and value matrices of the K-quant mixes and their experts, would pay for
// taking the rows back to plain Q6_K in every prefill panel: interleaved.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "ggml-like/core/types.h"
#include "ggml-like/graph/graph.h"

namespace ggl {

// The interleaved type the CPU takes an offered matrix in, with the kernel set in use; std::nullopt
// where it keeps the matrix as it is.
std::optional<Type> repacked_type(const OfferedWeight& w);

class RepackedWeights final : public PreparedWeights {
 public:
  // Rewrites the offered matrices that repacked_type() takes, in order; on_copied(i) after each.
  RepackedWeights(std::span<const OfferedWeight> offered, const std::function<void(size_t)>& on_copied);

  size_t count() const override { return copies_.size(); }
  size_t bytes() const override { return bytes_; }
  bool copied(const void* data) const override { return copies_.count(data) > 0; }

  struct Copy {
    Type file_type;
    std::array<int64_t, kMaxDims> ne;
    Type type;  // the interleaved one
    uint8_t* data;
  };
  // The copy of the matrix `leaf` is (its data, file type and shape), if any.
  const Copy* copy_of(const Tensor& leaf) const;

 private:
  std::unordered_map<const void*, Copy> copies_;  // by the offered matrix's data
  std::unique_ptr<uint8_t, void (*)(void*)> buffer_{nullptr, nullptr};
  size_t bytes_ = 0;
};

// Points every external leaf of `graph` that is a copied matrix at its copy, in its interleaved
// type, for as long as this object lives; then back to the file's. A leaf that a view or a copy
// reads keeps the file's bytes (the view would read them in the file's type).
class ReadingCopies {
 public:
  ReadingCopies(Graph& graph, const RepackedWeights* weights);
  ~ReadingCopies();
  ReadingCopies(const ReadingCopies&) = delete;
  ReadingCopies& operator=(const ReadingCopies&) = delete;

  int leaves() const { return static_cast<int>(swapped_.size()); }

 private:
  struct Swapped {
    Tensor* leaf;
    Type type;
    void* data;
  };
  std::vector<Swapped> swapped_;
};

}  // namespace ggl
