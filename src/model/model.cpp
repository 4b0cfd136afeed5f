#include "src/model/model.h"

namespace latte {

Model::Model(const std::string& path) : Model(std::make_shared<const ggl::GgufFile>(path)) {}

Model::Model(std::shared_ptr<const ggl::GgufFile> file)
    : file_(std::move(file)), hparams_(read_hparams(*file_)), weights_(load_weights(*file_, hparams_)) {}

}  // namespace latte
