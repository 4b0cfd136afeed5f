// get_rows from nodes: the table's rows (any type block_decode.h decodes) as f32, by the kernel of
// op_get_rows.cu.
#include "ggml-like/cuda/block_decode.h"
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/cuda/matmul_kernels.h"

namespace ggl::cuda {

bool supports_get_rows(const Tensor& node) {
  const Tensor* table = node.src[0];
  const Tensor* ids = node.src[1];
  if (!table || !ids || node.op != Op::kGetRows) return false;
  const int values = blocks::decoder_values(table->type);
  return values > 0 && table->rows_contiguous() && table->ne[0] % values == 0 && ids->type == Type::I32 &&
         ids->rows_contiguous() && node.type == Type::F32 && node.rows_contiguous();
}

void run_get_rows(const Tensor& node, cudaStream_t stream) {
  const Tensor& table = *node.src[0];
  const Tensor& ids = *node.src[1];
  check(launch_get_rows(table.type, table.data, shape_of(table), ids.data, shape_of(ids), node.data, shape_of(node),
                        stream),
        "get_rows");
}

}  // namespace ggl::cuda
