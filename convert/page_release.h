// Dropping pages of a read-only file mapping from the resident set once a tensor is converted,
// so that streaming a whole model keeps peak RSS near one tensor instead of the model size.
#pragma once
#include <cstddef>

namespace latte::convert {

// `data` must lie in a read-only mapping of a file (never in heap memory: dropping anonymous
// pages would zero them). Pages are re-read from the page cache if touched again, so rounding the
// range out to whole pages is harmless even where a page is shared with a neighbouring tensor.
void release_file_pages(const void* data, size_t nbytes);

}  // namespace latte::convert
