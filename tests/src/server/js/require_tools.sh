#!/bin/sh
# require_tools.sh TOOL... -- COMMAND...: runs COMMAND when every TOOL is installed (a command
# name, or a path to an executable). When one is missing, the test is skipped (exit 77, CTest's
# SKIP_RETURN_CODE here) with a message saying so, or fails when LATTE_REQUIRE_SHARED=1: CI sets
# it and installs the tools (scripts/install-deps.sh --web-tests), and a skip there checks nothing.
missing=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    */*) [ -x "$1" ] || missing="$missing $1" ;;
    *) command -v "$1" >/dev/null 2>&1 || missing="$missing $1" ;;
  esac
  shift
done
[ "$1" = "--" ] && shift
if [ -n "$missing" ]; then
  if [ "${LATTE_REQUIRE_SHARED:-}" = 1 ]; then
    echo "FAIL: not installed:$missing (LATTE_REQUIRE_SHARED=1; scripts/install-deps.sh --web-tests installs them)" >&2
    exit 1
  fi
  echo "SKIPPED: not installed:$missing (scripts/install-deps.sh --web-tests installs them)" >&2
  exit 77
fi
exec "$@"
