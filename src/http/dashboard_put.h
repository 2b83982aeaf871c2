#pragma once

#include <string_view>

#include "command/store.h"

// The dashboard's put (POST /dashboard/api/tubes/:tube/put, dashboard_put.cc): what it
// shares with a move, which puts too.
namespace stalkd::http::dash {

// beanstalkd's put has no defaults; the dashboard's form starts from stalk put's and
// Pheanstalk's (beanstalk_console's): priority 1024, no delay, a TTR of 60 seconds.
inline constexpr uint32_t kPutDefaultPri = 1024;
inline constexpr uint32_t kPutDefaultTtrS = 60;

// An action's failure: its HTTP status and its error's text.
struct ActionError {
  int status;
  std::string_view text;
};

// Why a put was refused (any outcome but kInserted and kExists): 413 "job too big", 503
// "server is draining" or "out of memory", else 500 "internal error".
ActionError PutRefusal(command::Outcome o);

}  // namespace stalkd::http::dash
