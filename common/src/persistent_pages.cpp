// Zero pages of a file, mapped shared (persistent_pages.h).
#include "common/persistent_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace dpu {

namespace {
constexpr char kMagic[8] = {'d', 'p', 'u', 'p', 'a', 'g', 'e', '1'};
std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// "" for a filesystem in memory (tmpfs, ramfs), else what it is.
std::string diskFilesystemOf(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return "a filesystem fstatfs cannot name";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case TMPFS_MAGIC:
    case RAMFS_MAGIC:
      return "";
    case EXT4_SUPER_MAGIC:  // ext2 and ext3 too
      return "ext4";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(fs.f_type));
      return std::string("a filesystem of type ") + hex;
    }
  }
}
}  // namespace

// The first page of the file.
struct PersistentPages::Header {
  char magic[8];
  uint64_t layout;
  uint64_t bytes;
  char boot_id[40];
  std::atomic<uint64_t> words[kWords];
};

std::string PersistentPages::bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.size() < 40 ? id : std::string();
}

Result<PersistentPages> PersistentPages::open(const std::string& path, uint64_t layout, size_t bytes) {
  static_assert(sizeof(Header) <= kPage);
  if (bytes == 0) return Error{"persistent table " + path + ": no bytes to map"};
  PersistentPages p;
  p.path_ = path;
  p.bytes_ = pageAlign(bytes);
  p.map_bytes_ = kPage + p.bytes_;
  p.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p.fd_ < 0) return Error{errnoText("persistent table " + path + ": open")};
  p.disk_filesystem_ = diskFilesystemOf(p.fd_);
  const std::string boot = bootId();
  struct stat st {};
  if (::fstat(p.fd_, &st) != 0) return Error{errnoText("persistent table " + path + ": fstat")};
  Header h{};
  if (static_cast<size_t>(st.st_size) != p.map_bytes_) {
    p.fresh_reason_ = st.st_size == 0 ? "a new file" : "another size";
  } else if (::pread(p.fd_, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
    p.fresh_reason_ = "an unreadable header";
  } else if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    p.fresh_reason_ = "not a table file";
  } else if (h.layout != layout || h.bytes != p.bytes_) {
    p.fresh_reason_ = "a table of another layout";
  } else if (boot.empty() || std::strncmp(h.boot_id, boot.c_str(), sizeof h.boot_id) != 0) {
    p.fresh_reason_ = boot.empty() ? "no boot id to check it against" : "written before the last boot";
  }
  p.adopted_ = p.fresh_reason_.empty();
  if (!p.adopted_) {
    // Holes throughout: every page reads as zero until written.
    if (::ftruncate(p.fd_, 0) != 0 || ::ftruncate(p.fd_, static_cast<off_t>(p.map_bytes_)) != 0) {
      return Error{errnoText("persistent table " + path + ": ftruncate to " + std::to_string(p.map_bytes_) + " bytes")};
    }
  }
  void* m = ::mmap(nullptr, p.map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd_, 0);
  if (m == MAP_FAILED) return Error{errnoText("persistent table " + path + ": mmap")};
  p.map_ = static_cast<uint8_t*>(m);
  p.data_ = p.map_ + kPage;
  if (!p.adopted_) {
    // The header last: a process killed before this leaves a file that is
    // not adopted next time.
    auto* hdr = reinterpret_cast<Header*>(p.map_);
    hdr->layout = layout;
    hdr->bytes = p.bytes_;
    std::strncpy(hdr->boot_id, boot.c_str(), sizeof hdr->boot_id - 1);
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(hdr->magic, kMagic, sizeof kMagic);
  }
  return p;
}

std::optional<uint64_t> PersistentPages::storedLayout(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Header h{};
  struct stat st {};
  const bool read = ::fstat(fd, &st) == 0 && ::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
  ::close(fd);
  const std::string boot = bootId();
  if (!read || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || boot.empty() ||
      std::strncmp(h.boot_id, boot.c_str(), sizeof h.boot_id) != 0 ||
      static_cast<uint64_t>(st.st_size) != kPage + h.bytes) {
    return std::nullopt;
  }
  return h.layout;
}

PersistentPages::PersistentPages(PersistentPages&& o) noexcept { *this = std::move(o); }

PersistentPages& PersistentPages::operator=(PersistentPages&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    adopted_ = o.adopted_;
    fresh_reason_ = std::move(o.fresh_reason_);
    disk_filesystem_ = std::move(o.disk_filesystem_);
    path_ = std::move(o.path_);
  }
  return *this;
}

PersistentPages::~PersistentPages() { reset(); }

void PersistentPages::reset() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  data_ = nullptr;
  fd_ = -1;
}

std::atomic<uint64_t>& PersistentPages::word(unsigned i) const {
  return reinterpret_cast<Header*>(map_)->words[i % kWords];
}

void PersistentPages::zero(size_t offset, size_t bytes) {
  if (bytes == 0) return;
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(kPage + offset),
                  static_cast<off_t>(bytes)) != 0) {
    std::memset(data_ + offset, 0, bytes);
  }
}

}  // namespace dpu
