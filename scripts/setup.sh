#!/usr/bin/env bash
# Installs what stalkd needs to build and test on Debian 12, if missing. Idempotent.
set -euo pipefail
need=()
for pkg in g++ cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev python3 beanstalkd \
           ruby ruby-beaneater \
           clang clang-format libclang-rt-14-dev \
           libboost-dev rapidjson-dev libcli11-dev prometheus \
           dpkg-dev lintian strace man-db systemd chromium \
           redis-server redis-sentinel libhiredis-dev libssl-dev openssl curl stunnel4; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
# The dashboard's browser tests run Debian's chromium (above) from node, through npm's
# playwright-core (tests/dashboard/package.json); any node >= 18 with npm will do.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if ((${#need[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian's beanstalkd package starts a system service on port 11300; the tests start their
# own on free ports, so a running service is harmless, but stop it to keep 11300 free.
# Likewise Debian's redis-server and redis-sentinel services: the Redis store's tests start
# their own on free ports.
if command -v systemctl >/dev/null 2>&1; then
  systemctl stop beanstalkd redis-server redis-sentinel >/dev/null 2>&1 || true
fi
# playwright-core, exactly as tests/dashboard/package-lock.json pins it (again whenever the
# lock file changes). It never downloads a browser: playwright-core has no install script,
# and the tests run /usr/bin/chromium.
dash="$(cd "$(dirname "$0")/.." && pwd)/tests/dashboard"
lock=$(sha256sum "$dash/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$dash/node_modules/.stalkd-lock" 2>/dev/null)" != "$lock" ]; then
  echo "setup: npm ci in tests/dashboard (playwright-core)"
  (cd "$dash" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock" >"$dash/node_modules/.stalkd-lock"
fi
