"""Certificates for the TLS tests, made with the `openssl` command into a temporary directory.

    certs = tls_certs.make()          # a CA, a server and a client certificate
    certs.server_cert, certs.server_key   # SAN IP:127.0.0.1, IP:::1, DNS:localhost
    certs.client_cert, certs.client_key   # subject CN=client-1,O=stalkd tests
    certs.ca                              # the CA that issued both
    certs.issue("other", "CN=other")      # another leaf of the same CA (for a reload)
    certs.stranger_cert, stranger_key     # a client certificate of another CA (refused)
    certs.cleanup()                       # or leave it to the process's exit

All keys are EC P-256 (fast to make), certificates valid for two days. Run as a script,
`python3 tests/lib/tls_certs.py DIR` writes them into DIR and prints the paths.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

OPENSSL = os.environ.get("OPENSSL_BIN", "openssl")
DAYS = "2"
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def _run(args):
    subprocess.run([OPENSSL] + args, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def _subj(dn):
    """An RFC 2253 name, "CN=a,O=b" (most specific first, as OpenSSL prints it), as openssl's
    -subj "/O=b/CN=a" (most specific last)."""
    return "/" + "/".join(reversed([part.strip() for part in dn.split(",")]))


class Certs:
    def __init__(self, directory=None):
        self._own = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="stalkd-tls-")
        os.makedirs(self.dir, exist_ok=True)
        self.ca, self.ca_key = self._ca("ca", "CN=stalkd test CA,O=stalkd tests")
        self.server_cert, self.server_key = self.issue(
            "server", "CN=localhost,O=stalkd tests",
            san="IP:127.0.0.1,IP:::1,DNS:localhost", usage="serverAuth")
        self.client_cert, self.client_key = self.issue(
            "client", "CN=client-1,O=stalkd tests", usage="clientAuth")
        self.client_subject = "CN=client-1,O=stalkd tests"
        stranger_ca, stranger_ca_key = self._ca("stranger-ca", "CN=another CA")
        self.stranger_ca = stranger_ca
        self.stranger_cert, self.stranger_key = self.issue(
            "stranger", "CN=stranger", usage="clientAuth", ca=(stranger_ca, stranger_ca_key))
        if self._own:
            atexit.register(self.cleanup)

    def path(self, name):
        return os.path.join(self.dir, name)

    def _ca(self, name, dn):
        crt, key = self.path(name + ".crt"), self.path(name + ".key")
        _run(["req", "-x509"] + EC + ["-keyout", key, "-out", crt, "-subj", _subj(dn),
                                      "-days", DAYS,
                                      "-addext", "basicConstraints=critical,CA:TRUE",
                                      "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        return crt, key

    def issue(self, name, dn, san=None, usage="serverAuth,clientAuth", ca=None):
        """A leaf certificate and key, NAME.crt and NAME.key, issued by the CA (or `ca`, a
        (cert, key) pair). Returns (cert path, key path)."""
        ca_crt, ca_key = ca or (self.ca, self.ca_key)
        crt, key, csr = (self.path(name + ext) for ext in (".crt", ".key", ".csr"))
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("extendedKeyUsage=%s\n" % usage)
            if san:
                f.write("subjectAltName=%s\n" % san)
        _run(["req", "-new"] + EC + ["-keyout", key, "-out", csr, "-subj", _subj(dn)])
        _run(["x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-set_serial",
              str(int.from_bytes(os.urandom(8), "big")), "-days", DAYS, "-extfile", ext,
              "-out", crt])
        return crt, key

    def cleanup(self):
        if self._own:
            shutil.rmtree(self.dir, ignore_errors=True)


def make(directory=None):
    return Certs(directory)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tls_certs.py DIR")
    c = make(sys.argv[1])
    for attr in ("ca", "server_cert", "server_key", "client_cert", "client_key",
                 "stranger_cert", "stranger_key"):
        print("%s %s" % (attr, getattr(c, attr)))
