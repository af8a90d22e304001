#!/usr/bin/env bash
# One module of rdma-core's own pyverbs test suite (Debian: python3-pyverbs ships it in
# /usr/share/doc/rdma-core/tests) through the provider, on device pw0 (spec/verbs.md §6).
# Passes when the module has no failure and no error, every skip reason it prints is one
# spec/verbs.md lists (a skip is allowed only for a capability the device reports absent), and
# at least as many of its tests pass as spec/verbs.md's table of minimums gives the module (over
# GID 0, or over the IPv6 GID). Prints the module's pass and skip counts.
# With GID 1: on device pw0:auto@::1, over its IPv6 GID (run_tests.py --gid 1); one such test
# at a time (only one process can bind [::1]:4791).
# With `attached`: the module runs twice, in-process (pw0:auto) and attached to the PF of a
# pushwire-rnicd on 127.0.3.N (spec/rnicd.md), and both runs must pass and skip the same tests.
# With PUSHWIRE_VERBS set (GID 0), on the devices it names (tests/netns/xdp_verbs.sh: a port over
# AF_XDP, which must not fall back to its UDP socket).
# usage: pyverbs.sh BUILD SPEC_VERBS_MD MODULE [GID | attached]
build=$(cd "$1" && pwd); spec=$2; module=$3; gid=${4:-0}
attached=
[ "$gid" = attached ] && { attached=1; gid=0; }
gid_args=()
if [ "$gid" != 0 ]; then
  export PUSHWIRE_VERBS="pw0:auto@::1"
  gid_args=(--gid "$gid")
fi
. "$(dirname "$0")/common.sh"
src=/usr/share/doc/rdma-core/tests
[ -f $src/run_tests.py ] || { echo "SKIPPED: $src/run_tests.py missing (Debian: python3-pyverbs)"; exit 77; }
# The suite, unpacked (some of its files are gzipped) into the build tree, once per version.
dst=$build/verbs/pyverbs-tests
stamp=$(cat /usr/share/doc/python3-pyverbs/changelog.Debian.gz 2>/dev/null | md5sum | cut -c1-12)
if [ ! -f "$dst/.stamp-$stamp" ]; then
  tmp=$(mktemp -d "$build/verbs/pyverbs-tests.XXXXXX")
  cp -r $src/. "$tmp/" && gunzip -f "$tmp"/*.gz && touch "$tmp/.stamp-$stamp"
  rm -rf "$dst.old"; [ -d "$dst" ] && mv "$dst" "$dst.old" 2>/dev/null || true
  mv "$tmp" "$dst" 2>/dev/null || rm -rf "$tmp"  # another test may have won the race
  rm -rf "$dst.old"
fi
log=$pw_work/pyverbs.log
rc=0
if [ -n "$attached" ]; then
  # In-process first: the counts the attached run must match.
  PUSHWIRE_VERBS=pw0:auto timeout 600 "${pw_prefix[@]}" /usr/bin/python3 "$dst/run_tests.py" --dev pw0 -v "$module" >"$log.inproc" 2>&1 || true
  inproc=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p; s/^OK (skipped=\([0-9]*\))$/skipped \1/p' "$log.inproc" | tr '\n' ' ')
  # A device process of its own, on the first free 127.0.3.N.
  for n in $(seq 1 250); do
    "$build/verbs/pushwire-rnicd" --port "pw0:127.0.3.$n" --control "$pw_work/rnicd.sock" 2>"$pw_work/rnicd.log" &
    rnicd=$!
    for _ in $(seq 250); do
      [ -S "$pw_work/rnicd.sock" ] && break
      kill -0 $rnicd 2>/dev/null || break
      sleep 0.02
    done
    [ -S "$pw_work/rnicd.sock" ] && break
    kill $rnicd 2>/dev/null || true; wait $rnicd 2>/dev/null || true
  done
  [ -S "$pw_work/rnicd.sock" ] || { cat "$pw_work/rnicd.log"; echo "FAIL: no device process"; exit 1; }
  export PUSHWIRE_VERBS="pw0@$pw_work/rnicd.sock"
fi
timeout 600 "${pw_prefix[@]}" /usr/bin/python3 "$dst/run_tests.py" --dev pw0 "${gid_args[@]}" -v "$module" >"$log" 2>&1 || rc=$?
if [ -n "$attached" ]; then
  kill $rnicd 2>/dev/null || true; wait $rnicd 2>/dev/null || true
  now=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p; s/^OK (skipped=\([0-9]*\))$/skipped \1/p' "$log" | tr '\n' ' ')
  if [ "$now" != "$inproc" ]; then
    cat "$log"; echo "FAIL: pyverbs $module attached ran/skipped '$now', in-process '$inproc'"; exit 1
  fi
  echo "pyverbs $module: attached to pushwire-rnicd as in-process: ran/skipped $now"
fi
if grep -qE 'ERROR: AddressSanitizer|runtime error:' "$log"; then cat "$log"; echo "FAIL: a sanitizer report"; exit 1; fi
# Ports over AF_XDP (PUSHWIRE_VERBS ... /xdp=IF, tests/netns/xdp_verbs.sh) must not have fallen back.
if [[ "${PUSHWIRE_VERBS:-}" == */xdp=* ]] && grep -q 'AF_XDP on .* unavailable' "$log"; then
  grep -m3 'AF_XDP on' "$log"; echo "FAIL: pyverbs $module: a port fell back to its UDP socket"; exit 1
fi
# the counts from unittest's summary ("Ran N tests", "OK (skipped=M)"): a test whose process
# forks may print its verdict apart from its name
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
skipped=$(sed -n 's/^OK (skipped=\([0-9]*\))$/\1/p; s/^FAILED (.*skipped=\([0-9]*\).*)$/\1/p' "$log" | tail -1)
ran=${ran:-0} skipped=${skipped:-0}
failed=$(grep -cE '^(FAIL|ERROR): ' "$log" || true)
ok=$((ran - skipped - failed))
echo "pyverbs $module (GID $gid): $ok passed, $skipped skipped, $failed failed or errors (exit $rc)"
bad=0
while IFS= read -r reason; do
  if ! grep -qF -- "$reason" "$spec"; then
    echo "FAIL: skip reason not listed in spec/verbs.md: $reason"; bad=1
  fi
done < <(sed -n "s/.*\.\.\. skipped '\(.*\)'$/\1/p" "$log" | sort -u)
{ grep -E '\.\.\. skipped' "$log" || true; } | sed 's/ (tests\.[^)]*)//' | sort | uniq -c | sed 's/^/  /'
if [ $rc != 0 ] || [ "$failed" != 0 ] || ! grep -qE '^OK( \(skipped=[0-9]+\))?$' "$log"; then
  cat "$log"; echo "FAIL: pyverbs $module"; exit 1
fi
[ $bad = 0 ] || exit 1
# The minimum, from the table under "### Tests each module must pass": | module | GID 0 | GID 1 |.
min=$(awk -F'|' -v m="$module" -v col=$((gid == 0 ? 3 : 4)) '
  /^#/ { in_table = ($0 ~ /^### Tests each module must pass/) }
  in_table { name = $2; gsub(/[ `]/, "", name); if (name == m) { v = $col; gsub(/[ `]/, "", v); print v; exit } }' "$spec")
case "$min" in
  ''|*[!0-9]*) echo "FAIL: spec/verbs.md gives no minimum for $module over GID $gid ('$min')"; exit 1 ;;
esac
if [ "$ok" -lt "$min" ]; then
  cat "$log"; echo "FAIL: pyverbs $module: $ok tests passed, spec/verbs.md requires at least $min"; exit 1
fi
echo "PASS: pyverbs $module (GID $gid${attached:+, attached}): $ok passed, at least $min required"
