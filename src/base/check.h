#pragma once

#include <cstdio>
#include <cstdlib>

// STALKD_CHECK is always on: a broken invariant is a bug, and continuing would corrupt jobs.
#define STALKD_CHECK(cond)                                                                  \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "stalkd: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

#ifdef NDEBUG
#define STALKD_DCHECK(cond) \
  do {                      \
  } while (0)
#else
#define STALKD_DCHECK(cond) STALKD_CHECK(cond)
#endif
