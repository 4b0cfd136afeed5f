#include "src/cli/flags/llama_spellings.h"

namespace latte::cli {
namespace {

// Only names that differ from latte's own; a flag spelled the same way in both (--ctx-size,
// --seed, --temp, ...) needs no entry. Which commands accept the target is up to each command.
constexpr LlamaSpelling kSpellings[] = {
    {"-ngl", "--n-gpu-layers", ""},
    {"--gpu-layers", "--n-gpu-layers", ""},
    {"-ot", "--override-tensor", ""},
    {"-nopo", "--no-op-offload", ""},
    {"-nr", "--no-repack", ""},
    // llama.cpp's -fa took no value before it became -fa on|off|auto; a bare one means on.
    {"-fa", "--flash-attn", "on"},
    {"--flash-attn", "--flash-attn", "on"},
    {"-ctk", "--cache-type-k", ""},
    {"-ctv", "--cache-type-v", ""},
    {"-ub", "--ubatch-size", ""},
    {"--predict", "--n-predict", ""},
    {"-sys", "--system-prompt", ""},
    {"-cnv", "--conversation", ""},
    {"-no-cnv", "--no-conversation", ""},
    {"-mli", "--multiline", ""},
    {"--multiline-input", "--multiline", ""},
    // llama-batched-bench's.
    {"-npp", "--n-pp", ""},
    {"-ntg", "--n-tg", ""},
    {"-npl", "--n-pl", ""},
    {"-pps", "--pp-shared", ""},
    // llama-server's.
    {"-np", "--parallel", ""},
};

}  // namespace

std::span<const LlamaSpelling> llama_spellings() { return kSpellings; }

const LlamaSpelling* find_llama_spelling(std::string_view typed) {
  for (const LlamaSpelling& s : kSpellings)
    if (s.llama == typed) return &s;
  return nullptr;
}

}  // namespace latte::cli
