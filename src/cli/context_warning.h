// The warning for a context larger than the model was trained for: past the training context the
// rotary positions are ones the model never saw and the text turns to gibberish, unless the
// file's rope scaling (YaRN or linear) was made for that length. llama.cpp warns too.
#pragma once
#include <cstdint>
#include <string>

#include "src/model/hparams.h"

namespace latte::cli {

// "" when n_ctx is within the training context; otherwise what happens past it and how the
// file's rope scaling applies. `what` names the setting ("-c 30000").
std::string beyond_training_warning(const Hparams& hp, const std::string& what, int64_t n_ctx);

}  // namespace latte::cli
