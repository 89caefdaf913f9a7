// Opening a persistent table whose capacity changed (conntrack.h,
// affinity.h): the file this boot's previous process left for another
// capacity is moved aside, opened as it was (taken over), its entries
// carried into the new table, and removed. Shared by the tables of this
// library; the layout word's bits from `kind_shift` up name the table's
// format and entry sizes, the bits below its size.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/persistent_pages.h"
#include "common/result.h"

namespace dpu::conntrack::detail {

// open(size, path) opens a table of `size` (the layout's low bits) on a
// file; carry(old, fresh) copies what `old` holds into `fresh`.
template <class T, class Open, class Carry>
Result<std::unique_ptr<T>> openResizing(const std::string& path, uint64_t layout, unsigned kind_shift,
                                        uint64_t size, Open&& open, Carry&& carry) {
  std::unique_ptr<T> old;
  const std::string aside = path + ".resize";
  // A file left aside means a carry that did not finish (the process died
  // before it opened for traffic): the table aside is the one in force.
  if (::access(aside.c_str(), F_OK) == 0) ::rename(aside.c_str(), path.c_str());
  if (const auto stored = PersistentPages::storedLayout(path);
      stored && *stored != layout && *stored >> kind_shift == layout >> kind_shift) {
    const uint64_t old_size = *stored & ((uint64_t{1} << kind_shift) - 1);
    if (old_size != 0 && ::rename(path.c_str(), aside.c_str()) == 0) {
      auto t = open(old_size, aside);
      if (t && (*t)->adopted()) old = std::move(*t);
      if (old == nullptr) ::unlink(aside.c_str());
    }
  }
  auto fresh = open(size, path);
  if (!fresh) {
    if (old != nullptr) {
      old.reset();
      ::rename(aside.c_str(), path.c_str());  // as it was: the next start may carry it over
    }
    return fresh;
  }
  if (old != nullptr) {
    carry(*old, **fresh);
    old.reset();
    ::unlink(aside.c_str());
  }
  return fresh;
}

}  // namespace dpu::conntrack::detail
