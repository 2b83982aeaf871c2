#pragma once

#include <string>
#include <string_view>

#include "redis/store_url.h"

// Credentials in --store URLs (link_auth.cc). Internal to src/redis/.
namespace stalkd::redis {

// Takes USER:PASSWORD@ out of `url`: *bare is the URL without it (what error messages may
// show), *auth what it said, %XX-decoded. false with *error set for a malformed escape.
bool TakeCredentials(std::string_view url, std::string* bare, Credentials* auth,
                     std::string* error);

// Whether a Conn's failure is a TLS connection refused (link_tls.cc).
bool IsTlsRefused(std::string_view why);

}  // namespace stalkd::redis
