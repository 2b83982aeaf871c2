#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <string>

// libssl, loaded with dlopen the first time TLS is used (net/tls.h says why): the functions
// the TLS wrapper calls, each resolved once. OpenSSL's macros that wrap a function listed
// here (SSL_CTX_set_mode, SSL_set_tlsext_host_name...) are written out as calls of it.
namespace stalkd::net::tls_lib {

#define STALKD_SSL_FUNCTIONS(X)         \
  X(OPENSSL_init_ssl)                   \
  X(CRYPTO_set_mem_functions)           \
  X(TLS_server_method)                  \
  X(TLS_client_method)                  \
  X(SSL_CTX_new)                        \
  X(SSL_CTX_free)                       \
  X(SSL_CTX_ctrl)                       \
  X(SSL_CTX_set_options)                \
  X(SSL_CTX_set_security_level)         \
  X(SSL_CTX_get_security_level)         \
  X(SSL_CTX_use_certificate_chain_file) \
  X(SSL_CTX_use_PrivateKey_file)        \
  X(SSL_CTX_check_private_key)          \
  X(SSL_CTX_load_verify_locations)      \
  X(SSL_CTX_set_default_verify_paths)   \
  X(SSL_CTX_set_verify)                 \
  X(SSL_CTX_set_client_CA_list)         \
  X(SSL_CTX_set_session_id_context)     \
  X(SSL_CTX_get0_certificate)           \
  X(SSL_load_client_CA_file)            \
  X(SSL_new)                            \
  X(SSL_free)                           \
  X(SSL_ctrl)                           \
  X(SSL_set_fd)                         \
  X(SSL_set_accept_state)               \
  X(SSL_set_connect_state)              \
  X(SSL_do_handshake)                   \
  X(SSL_read)                           \
  X(SSL_write)                          \
  X(SSL_has_pending)                    \
  X(SSL_get_error)                      \
  X(SSL_shutdown)                       \
  X(SSL_get_verify_result)              \
  X(SSL_get1_peer_certificate)          \
  X(SSL_get0_param)                     \
  X(SSL_get_version)                    \
  X(SSL_get_current_cipher)             \
  X(SSL_CIPHER_get_name)                \
  X(X509_get_subject_name)              \
  X(X509_NAME_print_ex)                 \
  X(X509_free)                          \
  X(X509_VERIFY_PARAM_set1_host)        \
  X(X509_VERIFY_PARAM_set1_ip_asc)      \
  X(X509_verify_cert_error_string)      \
  X(BIO_new)                            \
  X(BIO_s_mem)                          \
  X(BIO_ctrl)                           \
  X(BIO_free)                           \
  X(ERR_get_error)                      \
  X(ERR_clear_error)                    \
  X(ERR_error_string_n)

struct Api {
#define STALKD_SSL_POINTER(name) decltype(&::name) name;
  STALKD_SSL_FUNCTIONS(STALKD_SSL_POINTER)
#undef STALKD_SSL_POINTER
};

// The loaded library, or null (with *error) if libssl.so.3 cannot be loaded or lacks one of
// the functions. Loads at the first call; thread-safe.
const Api* Load(std::string* error);

// What Load returned (only after a successful Load).
const Api& Get();

// Bytes OpenSSL's allocations hold now (counted from the load on).
uint64_t CountedBytes();

// The allocator handed to OpenSSL (CRYPTO_set_mem_functions), which keeps CountedBytes: the
// usable size of every block it holds. Realloc to 0 bytes frees, as OpenSSL's own does.
void* CountedMalloc(size_t n, const char* file, int line);
void* CountedRealloc(void* old, size_t n, const char* file, int line);
void CountedFree(void* p, const char* file, int line);

// OpenSSL's error queue as one message ("file: reason; reason"), emptied.
std::string TakeErrors(const Api& api);

}  // namespace stalkd::net::tls_lib
