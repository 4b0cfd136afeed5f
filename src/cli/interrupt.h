// Ctrl-C handling for long-running commands: the first SIGINT sets a flag the generation loop
// polls (so the command can print what it has and its summary); a second SIGINT while the flag is
// still set terminates the process as usual.
#pragma once
#include <atomic>

namespace latte::cli {

// Installs the handler (idempotent) and returns the flag it sets.
std::atomic<bool>& install_interrupt_flag();

}  // namespace latte::cli
