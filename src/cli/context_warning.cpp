#include "src/cli/context_warning.h"

#include <fmt/format.h>

namespace latte::cli {

std::string beyond_training_warning(const Hparams& hp, const std::string& what, int64_t n_ctx) {
  if (n_ctx <= hp.n_ctx_train) return {};
  std::string scaling;
  switch (hp.rope.scaling) {
    case RopeScaling::kNone:
      scaling = "the file has no rope scaling, and latte has no --rope-scaling to add one";
      break;
    case RopeScaling::kYarn:
      scaling = fmt::format(
          "the file's YaRN rope scaling (factor {:g} over an original {} tokens) is what reaches {} and applies as "
          "it is; latte has no --rope-scaling to stretch it further",
          hp.rope.factor, hp.rope.original_context, hp.n_ctx_train);
      break;
    case RopeScaling::kLinear:
      scaling = fmt::format(
          "the file's linear rope scaling (factor {:g}) is what reaches {} and applies as it is; latte has no "
          "--rope-scaling to stretch it further",
          hp.rope.factor, hp.n_ctx_train);
      break;
  }
  return fmt::format(
      "{} is above the model's training context of {} tokens: text past {} tokens will likely "
      "degrade into gibberish ({})",
      what, hp.n_ctx_train, hp.n_ctx_train, scaling);
}

}  // namespace latte::cli
