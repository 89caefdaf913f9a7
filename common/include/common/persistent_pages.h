// Memory that outlives its process: zero pages of a file, mapped shared. A
// table kept there (the connection and affinity tables) is still there when
// its process dies, kill -9 included, and the next process of the same boot
// maps the same file and takes the table over.
//
// The file: one header page (magic, format, the caller's layout, the size,
// the boot it was written in, and a few words for the caller's
// bookkeeping), then the caller's bytes, page aligned. A file whose header
// does not match — another layout (a table of another size), another boot
// (the monotonic clock the tables' timestamps count restarted), damage, or
// no file — is started afresh: truncated to holes, which read as zero. On
// tmpfs (/run) the file is memory, and a reboot clears it anyway.
//
// Pages are faulted in on first write, as with anonymous zero pages; unlike
// them, a read of a never-written page of a shared file mapping allocates
// it, so the tables bound their walks by what they have used.
//
// Exactly one process may map a file: the dataplane holds its active lock
// (takeover.h) before it opens its tables. No DPDK.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace dpu {

class PersistentPages {
 public:
  static constexpr unsigned kWords = 8;  // the caller's header words

  // Maps `bytes` bytes (at least 1) of `path`, created with mode 0600 when
  // absent. `layout` names what the caller keeps there (its element sizes,
  // capacity, format version): a file of another layout starts afresh. The
  // error says which file and what failed.
  static Result<PersistentPages> open(const std::string& path, uint64_t layout, size_t bytes);
  // The layout of the table file at `path` when this boot wrote it whole
  // (nullopt: no such file, not a table, or from before the last boot): a
  // caller whose layout changed (a new capacity) can read the old table,
  // opening it with that layout, before it starts its own afresh.
  static std::optional<uint64_t> storedLayout(const std::string& path);

  PersistentPages() = default;
  PersistentPages(PersistentPages&& o) noexcept;
  PersistentPages& operator=(PersistentPages&& o) noexcept;
  PersistentPages(const PersistentPages&) = delete;
  PersistentPages& operator=(const PersistentPages&) = delete;
  ~PersistentPages();

  // The caller's bytes, page aligned.
  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  // The file held this layout, written in this boot: data() is what the last
  // process left (which may have died mid-update: the caller checks).
  bool adopted() const { return adopted_; }
  // Why it was not adopted ("" when it was): for the log.
  const std::string& freshReason() const { return fresh_reason_; }
  const std::string& path() const { return path_; }
  // "" when the file is in memory (tmpfs, ramfs), else its filesystem
  // ("ext4", ...): there the kernel writes the pages back to disk, and a
  // writer of many pages waits for it.
  const std::string& diskFilesystem() const { return disk_filesystem_; }
  // The caller's header words (zero in a fresh file).
  std::atomic<uint64_t>& word(unsigned i) const;
  // Makes [offset, offset + bytes) of data() zero again, freeing its pages
  // (offset and bytes page aligned).
  void zero(size_t offset, size_t bytes);

  // This boot's identity (/proc/sys/kernel/random/boot_id), "" if unknown.
  static std::string bootId();
  static constexpr size_t kPage = 4096;
  static size_t pageAlign(size_t n) { return (n + kPage - 1) / kPage * kPage; }

 private:
  struct Header;
  void reset();

  int fd_ = -1;
  uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  bool adopted_ = false;
  std::string fresh_reason_;
  std::string disk_filesystem_;
  std::string path_;
};

}  // namespace dpu
