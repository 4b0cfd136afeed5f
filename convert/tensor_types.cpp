#include "convert/tensor_types.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "ggml-like/quant/quant.h"

namespace latte::convert {

void encode_rows(ggl::Type t, int64_t ne0, int64_t rows, const RowFill& fill, uint8_t* dst,
                 const RowImportance& importance, const RowQuantizer& quantizer) {
  // About 4 MiB of floats per chunk, at least one row.
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(ne0, 1));
  const size_t rb = ggl::row_bytes(t, ne0);
  std::vector<float> buf(static_cast<size_t>(std::min(chunk_rows, rows) * ne0));
  for (int64_t r = 0; r < rows; r += chunk_rows) {
    const int64_t n = std::min(chunk_rows, rows - r);
    fill(r, n, buf.data());
    if (t == ggl::Type::F32) {
      std::memcpy(dst + static_cast<size_t>(r) * rb, buf.data(), static_cast<size_t>(n) * rb);
      continue;
    }
    // An exception may not leave an OpenMP region (the process would abort): the first one a row
    // throws is kept, the other rows skip their work, and it is rethrown after the loop.
    std::exception_ptr failure;
    bool failure_flag = false;  // set once failure is: read without the critical section
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      bool failed;
#pragma omp atomic read
      failed = failure_flag;
      if (failed) continue;
      try {
        const float* weights =
            importance.values ? importance.values + (r + i) / importance.rows_per_matrix * ne0 : nullptr;
        const float* src = buf.data() + i * ne0;
        uint8_t* out = dst + static_cast<size_t>(r + i) * rb;
        if (quantizer)
          quantizer(t, src, out, ne0, weights);
        else
          ggl::quantize_row(t, src, out, ne0, weights);
      } catch (...) {
#pragma omp critical(encode_rows_failure)
        if (!failure) failure = std::current_exception();
#pragma omp atomic write
        failure_flag = true;
      }
    }
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace latte::convert
