#include "net/tls_lib.h"

#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace stalkd::net::tls_lib {
namespace {

Api g_api;
const Api* g_loaded = nullptr;
std::string g_error;
std::atomic<uint64_t> g_bytes{0};

}  // namespace

void* CountedMalloc(size_t n, const char*, int) {
  void* p = malloc(n);
  if (p) g_bytes.fetch_add(malloc_usable_size(p), std::memory_order_relaxed);
  return p;
}

void CountedFree(void* p, const char*, int) {
  if (p == nullptr) return;
  g_bytes.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  free(p);
}

void* CountedRealloc(void* old, size_t n, const char* file, int line) {
  if (n == 0) {  // as OpenSSL's own: frees old (realloc would too, uncounted)
    CountedFree(old, file, line);
    return nullptr;
  }
  size_t before = old ? malloc_usable_size(old) : 0;
  void* p = realloc(old, n);
  if (p == nullptr) return nullptr;  // old is untouched
  g_bytes.fetch_sub(before, std::memory_order_relaxed);
  g_bytes.fetch_add(malloc_usable_size(p), std::memory_order_relaxed);
  return p;
}

namespace {

void LoadOnce() {
  // The library of Debian's libssl3 (OpenSSL 3.x); libcrypto comes with it.
  void* lib = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    g_error = std::string("cannot load libssl.so.3 (Debian's libssl3): ") + (why ? why : "?");
    return;
  }
#define STALKD_SSL_RESOLVE(name)                                       \
  g_api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (g_api.name == nullptr) {                                         \
    g_error = "libssl.so.3 has no " #name " (stalkd needs OpenSSL 3)"; \
    return;                                                            \
  }
  STALKD_SSL_FUNCTIONS(STALKD_SSL_RESOLVE)
#undef STALKD_SSL_RESOLVE
  // Before OpenSSL's first allocation; if something else in the process used OpenSSL first,
  // the count misses those bytes (the call then fails, harmlessly).
  g_api.CRYPTO_set_mem_functions(&CountedMalloc, &CountedRealloc, &CountedFree);
  if (g_api.OPENSSL_init_ssl(0, nullptr) != 1) {
    g_error = "OpenSSL failed to initialise: " + TakeErrors(g_api);
    return;
  }
  g_loaded = &g_api;
}

}  // namespace

const Api* Load(std::string* error) {
  static std::once_flag once;
  std::call_once(once, LoadOnce);
  if (g_loaded == nullptr && error != nullptr) *error = g_error;
  return g_loaded;
}

const Api& Get() { return g_api; }

uint64_t CountedBytes() { return g_bytes.load(std::memory_order_relaxed); }

std::string TakeErrors(const Api& api) {
  std::string out;
  while (unsigned long e = api.ERR_get_error()) {
    char buf[256];
    api.ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    // "error:0A000086:SSL routines::certificate verify failed": the reason is after the
    // last colon of the first four fields.
    std::string s = buf;
    size_t at = 0;
    for (int i = 0; i < 4 && at != std::string::npos; i++) at = s.find(':', at + 1);
    out += at == std::string::npos ? s : s.substr(at + 1);
  }
  return out;
}

}  // namespace stalkd::net::tls_lib
