#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace stalkd {

// SHA-256 (FIPS 180-4) of `data`, for the HTTP API's token hashes (http/tokens.h). Written
// here instead of taken from OpenSSL's libcrypto: loading that library (4.7 MB, 21,000
// relocations applied at exec) took most of the server's time from exec to listen
// (docs/PERFORMANCE.md, "Start-up").
std::array<unsigned char, 32> Sha256(std::string_view data);

}  // namespace stalkd
