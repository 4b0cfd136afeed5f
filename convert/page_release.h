// Dropping pages of a read-only file mapping from the resident set once a tensor is converted,
// so that streaming a whole model keeps peak RSS near one tensor instead of the model size.
#pragma once
#include <cstddef>

namespace latte::convert {

// Drops the pages of [data, data + nbytes) from the resident set, and also those of up to
// 256 KiB before it (not before mapping_begin): when a page faults in, the kernel maps its
// already-cached neighbours too ("fault-around", 64 KiB by default), which re-maps the tail of
// a range released just before; without the margin those pages would stay resident forever.
//
// The range must lie in a read-only mapping of a file (never in heap memory: dropping anonymous
// pages would zero them). Dropped pages come back from the page cache if touched again, so
// rounding out to whole pages, or dropping a neighbour's pages, is harmless.
void release_file_pages(const void* data, size_t nbytes, const void* mapping_begin);

}  // namespace latte::convert
