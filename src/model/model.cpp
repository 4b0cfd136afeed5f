#include "src/model/model.h"

namespace latte {

Model::Model(const std::string& path, ModelOptions options)
    : Model(std::make_shared<const ggl::GgufFile>(path), options) {}

Model::Model(std::shared_ptr<const ggl::GgufFile> file, ModelOptions options)
    : file_(std::move(file)), hparams_(read_hparams(*file_)), weights_(load_weights(*file_, hparams_)) {
  if (options.repack) {
    interleaved_ = std::make_unique<InterleavedWeights>(*file_, weights_);
    if (interleaved_->tensors() == 0) interleaved_.reset();
  }
}

}  // namespace latte
