#pragma once

#include <optional>
#include <string>
#include <string_view>

// Byte encodings for job bodies: base64 for JSON, escapes for a terminal.
namespace stalkd::cli {

// RFC 4648 base64 with padding.
std::string Base64Encode(std::string_view bytes);
// Decodes base64 (padding optional, no whitespace); nullopt if it is not base64.
std::optional<std::string> Base64Decode(std::string_view text);

// True when `bytes` is well-formed UTF-8 (no overlong forms, surrogates or code points
// above U+10FFFF), so it can be a JSON string as it is.
bool IsUtf8(std::string_view bytes);

// `bytes` for a terminal: valid UTF-8 text, newlines and tabs kept; every other control
// byte, DEL, and every byte that is not part of valid UTF-8 written as \xNN; a backslash
// as \\.
std::string Printable(std::string_view bytes);

}  // namespace stalkd::cli
