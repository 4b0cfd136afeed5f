#!/bin/sh
# install.sh SOURCE_DIR BUILD_DIR: installs the packages SOURCE_DIR/package-lock.json pins into
# BUILD_DIR/node_modules (the build tree: the source tree stays clean) with `npm ci`. Skipped when
# BUILD_DIR's packages were installed from these very package.json and lock file, so that running
# the tests again costs nothing (npm ci starts by deleting node_modules; it takes 10-20 s here).
set -eu
src=$1
dir=$2
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
cd "$dir"
if cat package.json package-lock.json | cmp -s - node_modules/.installed-from; then
  echo "node_modules up to date with package.json and package-lock.json"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error --fetch-timeout=60000
cat package.json package-lock.json >node_modules/.installed-from
