// A loaded model: the memory-mapped GGUF file, its hyperparameters and its weights (pointers into
// the mapping), and the copies the CPU backend made at load of the matrices it multiplies faster
// in a layout of its own (Backend::prepare_weights; sessions give them to their backends), and
// where a memory budget calls for it, the cache its routed experts are read into (expert_pager.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/expert_pager.h"
#include "src/model/expert_share.h"
#include "src/model/hparams.h"
#include "src/model/metadata_override.h"
#include "src/model/weights.h"

namespace latte {

struct ModelOptions {
  // Offer the CPU the matrices that are only ever the weights of matrix products, to rewrite into
  // its interleaved layout where its kernel set reads that faster (llama.cpp's "repack"); off:
  // the CPU reads every weight from the file's mapping (--no-repack).
  bool repack = true;
  // Metadata values to load the model with instead of the file's (--override-kv).
  std::vector<MetadataOverride> overrides;
  // Bytes for a cache of routed experts read from the file (expert_pager.h), where the routed
  // experts do not all fit the memory budget (--mem-budget); nullopt: the file's mapping serves
  // them all. Paged experts are not rewritten (repack).
  std::optional<size_t> expert_cache;
  // Expert parallelism (expert_share.h): with ranks > 1, this process holds only its rank's range
  // of each layer's routed experts, read from the file into the expert cache at load (within
  // expert_cache, when given), and its graphs exchange the other ranks' rows.
  ExpertShare expert_share;
};

class Model {
 public:
  // Throws ggl::Error for an unreadable file, an unsupported architecture or a bad tensor.
  explicit Model(const std::string& path, ModelOptions options = {});
  explicit Model(std::shared_ptr<const ggl::GgufFile> file, ModelOptions options = {});

  const ggl::GgufFile& file() const { return *file_; }
  std::shared_ptr<const ggl::GgufFile> shared_file() const { return file_; }
  const Hparams& hparams() const { return hparams_; }
  // The weights as the file holds them: what every graph is built from.
  const ModelWeights& weights() const { return weights_; }
  // The CPU's copies of some of them (nullptr: none). The file's pages of a copied matrix are
  // released at load (they stay in the page cache), so the process holds one copy of each weight.
  const std::shared_ptr<const ggl::PreparedWeights>& prepared_weights() const { return prepared_; }
  // The routed experts' cache (nullptr: none); sessions give it to their backends.
  const std::shared_ptr<ExpertPager>& expert_pager() const { return pager_; }
  const ExpertShare& expert_share() const { return share_; }
  // This rank's routed experts of a layer (expert parallelism; else all of them).
  ggl::ExpertRange own_experts(int64_t layer) const {
    return share_.split.of(layer, hparams_.moe.n_expert, share_.rank, share_.ranks);
  }

 private:
  std::shared_ptr<const ggl::GgufFile> file_;
  Hparams hparams_;
  ModelWeights weights_;
  std::shared_ptr<const ggl::PreparedWeights> prepared_;
  std::shared_ptr<ExpertPager> pager_;
  ExpertShare share_;
};

}  // namespace latte
