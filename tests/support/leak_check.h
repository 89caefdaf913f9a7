// LeakSanitizer's check for a test process (the Catch2 main, the fakes),
// run when main is done rather than at exit.
//
// cpprest keeps a static thread pool. Returning from main destroys it at
// exit with work still queued (the continuations of the last requests' and
// answers' body streams), and LeakSanitizer, which checks after the static
// destructors, then reported that dropped work as leaked: hostshim_unit and
// fake_dpu_api_concurrency failed so in the ASan stage now and then (the
// fake in 3 runs of 15). Checked before, every object is still owned by
// someone, so what the check reports is a leak of ours. The check runs once:
// none follows at exit, and exit runs its handlers and destructors as ever.
#pragma once

#include <cstdio>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define DPU_TEST_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(DPU_TEST_LSAN)
#define DPU_TEST_LSAN 1
#endif
#ifdef DPU_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace dpu::test {

// Checks for leaks (a process built with LeakSanitizer; a leak ends it
// with LeakSanitizer's exit code) and returns `code`: `return
// checkLeaksNow(code);` at the end of main.
inline int checkLeaksNow(int code) {
#ifdef DPU_TEST_LSAN
  std::fflush(nullptr);  // what was printed, before a leak ends the process
  __lsan_do_leak_check();
#endif
  return code;
}

}  // namespace dpu::test
