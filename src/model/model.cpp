#include "src/model/model.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"

namespace latte {
namespace {

// The slots whose tensors are only ever the weights of matrix products: attention and
// feed-forward projections, experts, the output matrix when it is not the token embeddings; not
// the token embeddings (rows are looked up), nor MLA's k_b / v_b / kv_b (also read transposed).
std::vector<WeightRef*> product_slots(ModelWeights& w) {
  std::vector<WeightRef*> out;
  if (w.output != w.token_embd) out.push_back(&w.output);
  for (LayerWeights& l : w.layers)
    for (WeightRef* r :
         {&l.wo, &l.wq, &l.wk, &l.wv, &l.wq_a, &l.wq_b, &l.wkv_a_mqa, &l.ffn_gate, &l.ffn_up, &l.ffn_down,
          &l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps, &l.ffn_gate_shexp, &l.ffn_up_shexp, &l.ffn_down_shexp})
      out.push_back(r);
  return out;
}

// The tensors of the product slots, less any also in another slot (tied token embeddings), in
// the file's order.
std::vector<WeightRef> product_weights(ModelWeights w) {
  const std::vector<WeightRef*> products = product_slots(w);
  std::set<WeightRef> offered, kept;
  for_each_weight(w, [&](WeightRef& r) {
    if (!r) return;
    if (std::find(products.begin(), products.end(), &r) == products.end())
      kept.insert(r);
    else
      offered.insert(r);
  });
  std::vector<WeightRef> out;
  for (WeightRef t : offered)
    if (!kept.count(t)) out.push_back(t);
  return out;  // a set of pointers into the file's table: in the file's order
}

ggl::OfferedWeight offer(WeightRef t, WeightRef output) {
  return {t->name, t->type,   {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
          t->data, t->nbytes, t == output ? ggl::WeightUse::kOutputHead : ggl::WeightUse::kProducts};
}

std::shared_ptr<const ggl::GgufFile> open_with_overrides(const std::string& path,
                                                         const std::vector<MetadataOverride>& overrides) {
  auto file = std::make_shared<ggl::GgufFile>(path);
  apply_metadata_overrides(*file, overrides);
  return file;
}

}  // namespace

Model::Model(const std::string& path, ModelOptions options)
    : Model(open_with_overrides(path, options.overrides), options) {}

Model::Model(std::shared_ptr<const ggl::GgufFile> file, ModelOptions options)
    : file_(std::move(file)), hparams_(read_hparams(*file_)), weights_(load_weights(*file_, hparams_)) {
  share_ = std::move(options.expert_share);
  if (share_.ranks > 1) {
    if (hparams_.moe.n_expert <= 0)
      ggl::fail("{}: the model has no routed experts to divide among ranks", file_->path());
    if (!share_.exchange) ggl::fail("expert parallelism over {} ranks without an exchange between them", share_.ranks);
    ExpertPager::Options po = ExpertPager::Options::from_environment();
    for (int64_t l = 0; l < hparams_.n_layer; ++l) po.owned.push_back(own_experts(l));
    pager_ = std::make_shared<ExpertPager>(*file_, weights_, options.expert_cache.value_or(SIZE_MAX), po);
    pager_->load_owned();  // else (a budget below the share) its experts are read as they are needed
  } else if (options.expert_cache) {
    pager_ = std::make_shared<ExpertPager>(*file_, weights_, *options.expert_cache);
  }
  if (!options.repack) return;
  std::vector<WeightRef> tensors;
  std::vector<ggl::OfferedWeight> offered;
  for (WeightRef t : product_weights(weights_)) {
    if (pager_ && pager_->holds(t->data)) continue;  // read from the file into the cache as they are
    tensors.push_back(t);
    offered.push_back(offer(t, weights_.output));
  }
  prepared_ = ggl::make_backend({})->prepare_weights(offered, [&](size_t i) { file_->release(*tensors[i]); });
}

}  // namespace latte
