// The GPU placement flags, with llama.cpp's spellings: -ngl (registered by SessionFlags, which also
// serves bench's lists; -1 and all mean every layer and the output head), --cpu-moe, --n-cpu-moe N, --gpu-budget SIZE|auto, -ot/--override-tensor
// REGEX=cuda|cpu (repeatable, comma lists). Shared by the commands that run a model (which offload
// when a GPU exists and otherwise note that they run on the CPU) and by `latte info --plan` (which
// plans without a GPU).
#pragma once
#include <CLI/CLI.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "src/placement/placement.h"

namespace latte::cli {

struct PlacementFlags {
  bool cpu_moe = false;
  int n_cpu_moe = 0;
  std::string gpu_budget;
  std::vector<std::string> overrides;

  void add_to(CLI::App& app, const std::string& group);
  // The flags given, as typed, for notes ("--cpu-moe --gpu-budget 12G").
  std::vector<std::string> given() const;
  // The request for a model of n_layer layers, with -ngl's value (may be empty). `auto` (for
  // --gpu-budget, or -ngl auto without a budget) takes the free memory of the GPU given,
  // less a margin; without one it is an error. Throws ggl::Error naming the flag for bad values.
  PlacementRequest request(const std::string& gpu_layers, int n_layer, std::optional<size_t> gpu_free,
                           std::optional<size_t> gpu_total) const;
  // Checks every value without a model or a device (for commands that will not use them).
  void validate(const std::string& gpu_layers) const;

 private:
  const CLI::App* app_ = nullptr;
  std::string typed(std::string_view name) const;
  bool wants_auto(const std::string& gpu_layers) const;
};

// Why the placement flags change nothing here: "built without CUDA, running on the CPU", "no CUDA
// device (...), running on the CPU".
std::string cpu_only_reason();

// What `auto` leaves free on a GPU: the larger of 512 MiB and 5% of its memory (the CUDA
// context, cuBLAS workspaces, other programs' growth).
size_t auto_budget(size_t free_bytes, size_t total_bytes);

}  // namespace latte::cli
