// Checkpoints and records that survive a crash at any instant: the new content
// goes to a temporary file in the same directory, is fsync'ed, renamed over the
// old one, and the directory is fsync'ed. A reader sees the old file or the new
// one, never a mix.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace dpu {

// Creates missing parent directories (mode 0700).
Result<void> writeFileAtomic(const std::string& path, std::string_view content, unsigned mode = 0600);

// The whole file. A missing file is an error whose message says so; use
// fileExists() first when absence is normal.
Result<std::string> readFile(const std::string& path);
bool fileExists(const std::string& path);

// mkdir -p with the given mode for directories it creates.
Result<void> makeDirectories(const std::string& path, unsigned mode = 0700);

}  // namespace dpu
