#!/usr/bin/env bash
# Installs what the web client's browser test (web/browser_test.go) needs,
# on a fresh machine or an already prepared one (idempotent):
#   - Debian's chromium (apt), which playwright-core drives headless at
#     /usr/bin/chromium (INBOXD_CHROMIUM to use another); the test never
#     downloads a browser build of its own;
#   - checks that Node.js 20 or later is there for the test runner.
# Needs root or sudo for the install.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

chromium=${INBOXD_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ -n "${INBOXD_CHROMIUM:-}" ]; then
    echo "chromium.sh: INBOXD_CHROMIUM=$chromium is not an executable" >&2
    exit 1
  fi
  echo "chromium.sh: no $chromium; installing Debian's chromium with apt" >&2
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
# Debian's /usr/bin/chromium is a shell wrapper: ask the browser itself.
if ! "$chromium" --headless --no-sandbox --version 2>/dev/null | grep -q Chromium; then
  echo "chromium.sh: $chromium does not run (--version failed)" >&2
  exit 1
fi

if ! command -v node >/dev/null 2>&1; then
  echo "chromium.sh: the browser test needs Node.js 20 or later (node not found)" >&2
  exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "chromium.sh: the browser test needs Node.js 20 or later (found $(node --version))" >&2
  exit 1
fi
