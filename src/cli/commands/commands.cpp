#include "src/cli/commands/commands.h"

namespace latte::cli {

const Command kCommands[] = {
    {"run", "complete a prompt, streaming the continuation (default model: the shipped tiny MLA model)", cmd_run, true},
    {"chat", "talk with a model: streamed replies, history, /save and /load with the cache", cmd_chat, true},
    {"serve", "an OpenAI-compatible HTTP server with continuous batching (llama-server style)", cmd_serve, true},
    {"info", "describe a GGUF file: architecture, hyperparameters, tensors, sizes", cmd_info},
    {"tokenize", "print the token ids of a text under a model's tokenizer", cmd_tokenize},
    {"convert", "convert a Hugging Face model directory (safetensors) to GGUF", cmd_convert},
    {"quantize", "re-quantize a GGUF file's weights (q8_0, q4_0, q4_1, f16, ...)", cmd_quantize},
    {"eval", "evaluate token ids and write the logits of every position (float32)", cmd_eval, true},
    {"perplexity", "perplexity over a text, llama-perplexity style; KL divergence against a base model's file",
     cmd_perplexity, true},
    {"imatrix", "an importance matrix for quantization from a text, llama-imatrix style (GGUF or .dat)", cmd_imatrix},
    {"bench", "measure prompt (pp) and generation (tg) speed, llama-bench style; --roofline: DRAM bound", cmd_bench,
     true},
    {"batched-bench", "measure many sequences decoded together, llama-batched-bench style (pp, tg, B sequences)",
     cmd_batched_bench, true},
    {"synth", "write a synthetic DeepSeek GGUF (V2-Lite/V2/V3 geometry, seeded random weights)", cmd_synth},
};
const int kCommandCount = static_cast<int>(sizeof(kCommands) / sizeof(kCommands[0]));

}  // namespace latte::cli
