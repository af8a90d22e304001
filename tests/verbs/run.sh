#!/usr/bin/env bash
# Runs a program under the provider (tests/verbs/common.sh's pw_run): the ctest entry of a
# verbs program built here.   usage: run.sh BUILD PROGRAM [ARGS...]
build=$(cd "$1" && pwd); shift
. "$(dirname "$0")/common.sh"
out=$pw_work/out.log
rc=0
pw_run "$@" >"$out" 2>&1 || rc=$?
cat "$out"
if grep -qE 'ERROR: AddressSanitizer|runtime error:' "$out"; then echo "FAIL: a sanitizer report"; exit 1; fi
exit $rc
