#include "http/response.h"

#include <charconv>
#include <cstdio>

#include "base/base64.h"
#include "base/random.h"
#include "http/json.h"

namespace stalkd::http {
namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Request Entity Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 507:
      return "Insufficient Storage";
    default:
      return "Unknown";
  }
}

void AppendNumber(uint64_t n, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  out->append(buf, r.ptr);
}

}  // namespace

void AppendResponse(const Response& r, std::string_view request_id, bool close, bool head,
                    std::string* out) {
  bool no_body = r.status == 204 || r.status == 304;
  out->append("HTTP/1.1 ");
  AppendNumber(static_cast<uint64_t>(r.status), out);
  out->push_back(' ');
  out->append(Reason(r.status));
  out->append("\r\n");
  if (!no_body) {
    out->append("Content-Type: ");
    out->append(r.content_type);
    out->append("\r\nContent-Length: ");
    AppendNumber(r.body.size(), out);
    out->append("\r\n");
  }
  out->append("X-Request-ID: ");
  out->append(request_id);
  out->append("\r\n");
  out->append(r.extra_headers);
  if (close) out->append("Connection: close\r\n");
  out->append("\r\n");
  if (!no_body && !head) out->append(r.body);
}

std::string NewRequestId() {
  static uint64_t counter = 0;
  static char prefix[17] = {};
  if (prefix[0] == 0) {
    unsigned char bytes[8] = {};
    if (!RandomBytes(bytes, sizeof bytes)) {
      uint64_t t = static_cast<uint64_t>(SystemClock().Now());
      for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = static_cast<unsigned char>(t >> (8 * i));
    }
    for (size_t i = 0; i < sizeof bytes; i++) snprintf(prefix + 2 * i, 3, "%02x", bytes[i]);
  }
  char buf[40];
  int n =
      snprintf(buf, sizeof buf, "%s%016llx", prefix, static_cast<unsigned long long>(++counter));
  return std::string(buf, static_cast<size_t>(n));
}

void Error(Response* r, int status, std::string_view text) {
  r->status = status;
  r->body.clear();
  JsonWriter w(&r->body);
  w.StartObject();
  w.Key("error");
  w.String(text);
  w.EndObject();
}

void Message(Response* r, int status, std::string_view text) {
  r->status = status;
  r->body.clear();
  JsonWriter w(&r->body);
  w.StartObject();
  w.Key("msg");
  w.String(text);
  w.EndObject();
}

void AppendBase64(std::string_view data, std::string* out) { base64::Append(data, out); }

bool DecodeBase64(std::string_view text, std::string* out) {
  return base64::DecodePadded(text, out);
}

}  // namespace stalkd::http
