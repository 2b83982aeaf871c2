#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "command/identity.h"
#include "command/store.h"

namespace stalkd::command {

// One connection's protocol, between the server's socket and a store Session: bytes in,
// reply bytes out. The server's connection machinery (reading, writing, output bounds,
// holding replies until they are durable) serves any FrontEnd the same way; a listener
// says which FrontEnd its connections speak.
class FrontEnd {
 public:
  virtual ~FrontEnd() = default;

  // Input: reserve room for up to n bytes, write into it, then commit what was written.
  virtual char* PrepareInput(size_t n) = 0;
  virtual void CommitInput(size_t n) = 0;
  // Handles buffered input until it runs out, the front end waits (a pending result,
  // closing, output above kOutputHighWater) or `max_steps` requests were handled. Returns
  // true if it stopped only because of `max_steps`.
  virtual bool Run(size_t max_steps) = 0;
  // A result the session's store completed later (Client::OnResult, forwarded).
  virtual void OnResult(const Result& r) = 0;
  // The peer will send nothing more.
  virtual void OnInputClosed() = 0;

  virtual std::string& output() = 0;
  virtual bool closing() const = 0;  // close once the output is written
  virtual bool waiting() const = 0;  // a result is pending
  // The pending result is one that ends when the client goes away (a reserve that waits):
  // the connection watches for a hang-up meanwhile and then calls OnInputClosed.
  virtual bool waiting_for_client() const = 0;
  virtual bool input_closed() const = 0;  // OnInputClosed was called
  virtual bool runnable() const = 0;      // Run() could make progress now
  virtual size_t buffered_input() const = 0;
  virtual const Session& session() const = 0;

  // Output buffer capacity kept once everything is sent: the text protocol keeps what its
  // longest reply needed (short replies then never allocate); HTTP, whose responses never
  // fit the string's inline buffer, lets an idle connection hold none.
  virtual size_t output_keep() const { return 64 * 1024; }

  // Closing while the peer may still be sending what the front end refused to read (an
  // HTTP request refused before its body): the connection then half-closes, reads and
  // throws away up to this many more bytes (Discarded counts them), and closes. Closing
  // with unread input would make the kernel reset the connection, and a peer still
  // sending would lose the answer. 0: close at once.
  virtual uint64_t linger_bytes() const { return 0; }
  virtual void Discarded(size_t n) { (void)n; }

  // The client's TLS certificate proved it to be `who` (--tls-identities), before it sent
  // anything: the text protocol starts authenticated, as after `auth`, without a reply;
  // front ends without identities ignore it.
  virtual void ProvenBy(const Identity& who) { (void)who; }

  // Output above this stops request processing until the peer reads it.
  static constexpr size_t kOutputHighWater = 1 << 20;
};

}  // namespace stalkd::command
