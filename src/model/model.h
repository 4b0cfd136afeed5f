// A loaded model: the memory-mapped GGUF file, its hyperparameters and its weights (pointers
// into the mapping; a load copies no tensor data).
#pragma once
#include <memory>
#include <string>

#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"
#include "src/model/weights.h"

namespace latte {

class Model {
 public:
  // Throws ggl::Error for an unreadable file, an unsupported architecture or a bad tensor.
  explicit Model(const std::string& path);
  explicit Model(std::shared_ptr<const ggl::GgufFile> file);

  const ggl::GgufFile& file() const { return *file_; }
  std::shared_ptr<const ggl::GgufFile> shared_file() const { return file_; }
  const Hparams& hparams() const { return hparams_; }
  const ModelWeights& weights() const { return weights_; }

 private:
  std::shared_ptr<const ggl::GgufFile> file_;
  Hparams hparams_;
  ModelWeights weights_;
};

}  // namespace latte
