#include "src/cli/commands.h"

namespace latte::cli {

const Command kCommands[] = {
    {"info", "describe a GGUF file: architecture, hyperparameters, tensors, sizes", cmd_info},
};
const int kCommandCount = static_cast<int>(sizeof(kCommands) / sizeof(kCommands[0]));

}  // namespace latte::cli
