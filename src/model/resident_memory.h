// How much of a range of this process's address space is in its memory, from the kernel's page
// table (/proc/self/pagemap): what a process holds, as opposed to what it has mapped.
#pragma once
#include <cstddef>

namespace latte {

// Bytes of [begin, begin + bytes) whose pages are present in this process's memory (pages the
// range only partly covers count whole). Throws ggl::Error where the page table cannot be read.
size_t resident_in_memory(const void* begin, size_t bytes);

}  // namespace latte
