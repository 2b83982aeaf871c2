#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "http/exchange.h"

// Encoding responses: the status line and headers around a body, lmstfy's JSON shapes, and
// the base64 its `data` fields use.
namespace stalkd::http {

// Appends the whole response: status line, Content-Type, Content-Length, X-Request-ID,
// `Connection: close` when `close`, then the body (none for HEAD, 204 and 304).
void AppendResponse(const Response& r, std::string_view request_id, bool close, bool head,
                    std::string* out);

// A new request id, 32 hex digits: a random prefix drawn at start and a counter, so unique
// in this process and across its restarts.
std::string NewRequestId();

// {"error":"<text>"} with the given status, as lmstfy answers failures.
void Error(Response* r, int status, std::string_view text);
// {"msg":"<text>"} with the given status.
void Message(Response* r, int status, std::string_view text);

// Standard base64 with padding (Go's encoding of a []byte in JSON).
void AppendBase64(std::string_view data, std::string* out);
// Decodes standard base64; false if it is not valid.
bool DecodeBase64(std::string_view text, std::string* out);

}  // namespace stalkd::http
