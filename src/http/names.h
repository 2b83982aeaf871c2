#pragma once

#include <string>
#include <string_view>

// How lmstfy's namespaces and queues map onto tubes (docs/HTTP.md, "Names").
namespace stalkd::http {

// lmstfy's limit on a namespace or queue name.
inline constexpr size_t kMaxNameLength = 255;

// Checks a namespace and queue name as lmstfy's ValidateParams does (1..255 bytes of
// [-_A-Za-z0-9], a queue not starting with '_') and that the tube they map to, "ns/queue",
// is a valid tube name (at most 200 bytes, not starting with '-'). Returns nullptr and sets
// *tube, or lmstfy's error text for a 400.
const char* QueueTube(std::string_view ns, std::string_view queue, std::string* tube);

// The namespace and queue of a tube named "ns/queue"; false for a tube not of that form
// (one that only the text protocol can reach).
bool SplitTube(std::string_view tube, std::string_view* ns, std::string_view* queue);

}  // namespace stalkd::http
