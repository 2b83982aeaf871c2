#pragma once

#include <stdexcept>
#include <string>

// How `stalk` ends: its exit codes (stalk(1), README) and the error that carries one.
namespace stalkd::cli {

enum Exit : int {
  kExitOk = 0,
  kExitNotFound = 1,    // no such job or tube, a reserve that timed out, an empty peek
  kExitUsage = 2,       // bad arguments (CLI11's parse errors too)
  kExitConnection = 3,  // cannot connect, or the connection broke
  kExitServer = 4,      // the server answered an error (OUT_OF_MEMORY, DRAINING, ...)
  kExitInput = 5,       // input that is not what it should be (a bad `load` line)
};

// Ends the command: main prints "stalk: <what>" on stderr and exits with `code`.
class Failure : public std::runtime_error {
 public:
  Failure(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace stalkd::cli
