#pragma once

#include <string>

#include "net/tls.h"
#include "server/options.h"

namespace stalkd::server {

// --tls-cert, --tls-key, --tls-client-ca, --tls-handshake-timeout with its value; false after
// printing why.
bool ParseTlsOption(const std::string& name, const std::string& value, Options* o);
// The TLS flags agree with the listeners (a tls:// listener has a certificate and key; no TLS
// flag without one); false after printing why.
bool CheckTlsOptions(const Options& o);
// What the server's TLS context is made of.
net::TlsConfig TlsConfigFor(const Options& o);

}  // namespace stalkd::server
