// A loaded model: the memory-mapped GGUF file, its hyperparameters and its weights: pointers into
// the mapping, except the matrices rewritten for the CPU's decode kernels (interleave.h).
#pragma once
#include <memory>
#include <string>

#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"
#include "src/model/interleave.h"
#include "src/model/weights.h"

namespace latte {

struct ModelOptions {
  // Rewrite matrices into the CPU's interleaved layout where the kernel set in use reads it
  // (interleave.h); off: every weight stays in the file's mapping (--no-repack).
  bool repack = true;
};

class Model {
 public:
  // Throws ggl::Error for an unreadable file, an unsupported architecture or a bad tensor.
  explicit Model(const std::string& path, ModelOptions options = {});
  explicit Model(std::shared_ptr<const ggl::GgufFile> file, ModelOptions options = {});

  const ggl::GgufFile& file() const { return *file_; }
  std::shared_ptr<const ggl::GgufFile> shared_file() const { return file_; }
  const Hparams& hparams() const { return hparams_; }
  // The weights the CPU reads (interleaved where repacked).
  const ModelWeights& weights() const { return interleaved_ ? interleaved_->weights() : weights_; }
  // The weights as the file holds them (for a device backend, which takes the file's types).
  const ModelWeights& file_weights() const { return weights_; }
  // The matrices rewritten at load (nullptr: none).
  const InterleavedWeights* interleaved() const { return interleaved_.get(); }

 private:
  std::shared_ptr<const ggl::GgufFile> file_;
  Hparams hparams_;
  ModelWeights weights_;
  std::unique_ptr<InterleavedWeights> interleaved_;
};

}  // namespace latte
