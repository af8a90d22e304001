#!/usr/bin/env bash
# The plugin in the real Wireshark GUI (Qt), under Xvfb (spec/wireshark.md §7): Wireshark opens a
# capture at a push-push frame with the plugin loaded and its preference given on the command
# line (an unknown preference would stop it), starts with nothing on stderr (no plugin error, no
# dissector bug: WIRESHARK_ABORT_ON_DISSECTOR_BUG), and the screen is saved as PNG with the
# packet tree expanded (checked: the window took its size and place, and the packet details show
# at least 5 more lines once pushwire's tree is expanded than with every tree collapsed).
# With STATS.png, Wireshark is started again with -z pushwire,pools: the Statistics dialog of the
# same name opens, and its screen is saved too.
# usage: gui.sh PLUGIN_SO CAPTURE FRAME OUT.png [STATS.png]
set -euo pipefail
so=$1 capture=$2 frame=$3 out=$4 stats=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
for t in wireshark Xvfb xwd xdotool setpriv; do
  command -v $t >/dev/null || { echo "SKIPPED: $t is not installed (Debian: wireshark xvfb x11-apps xdotool)"; exit 77; }
done
work=$(mktemp -d /tmp/pushwire-gui.XXXXXX)
xpid= wpid=
cleanup() {
  [ -n "$wpid" ] && kill "$wpid" 2>/dev/null || true
  [ -n "$xpid" ] && kill "$xpid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# A display of our own: the first free number from 90.
d=90
while [ -e /tmp/.X11-unix/X$d ] || [ -e /tmp/.X$d-lock ]; do d=$((d + 1)); done
# -noreset: the server stays up as the first Wireshark leaves (a reset then refuses the second)
Xvfb :$d -screen 0 1400x1000x24 -nolisten tcp -noreset >"$work/xvfb.log" 2>&1 &
xpid=$!
for _ in $(seq 100); do [ -e /tmp/.X11-unix/X$d ] && break; sleep 0.05; done
[ -e /tmp/.X11-unix/X$d ] || { cat "$work/xvfb.log"; echo "FAIL: Xvfb did not start"; exit 1; }
export DISPLAY=:$d
# Wireshark ignores personal plugin folders as root: it runs as nobody, in a HOME of its own.
home=$work/home
mkdir -p "$home/.local/lib/wireshark/plugins/4.0/epan" "$home/.config/wireshark" "$home/run"
cp "$so" "$home/.local/lib/wireshark/plugins/4.0/epan/"
cp "$capture" "$home/"
name=$(basename "$capture")
# No byte view, so that the tree has the room; no start-up dialogs.
cat >"$home/.config/wireshark/preferences" <<'EOF'
gui.layout_content_3: NONE
gui.update.enabled: FALSE
EOF
chmod -R a+rwX "$work"
chmod 700 "$home/run"
run=()
if [ "$(id -u)" = 0 ]; then
  run=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  chown -R 65534:65534 "$home"
fi
start() {  # ARGS...: Wireshark on the capture; sets wpid and win (the window showing it)
  "${run[@]}" env HOME="$home" XDG_RUNTIME_DIR="$home/run" XDG_CONFIG_HOME="$home/.config" LC_ALL=C.UTF-8 \
    WIRESHARK_ABORT_ON_DISSECTOR_BUG=1 QT_QPA_PLATFORM=xcb NO_AT_BRIDGE=1 \
    wireshark -o pushwire.idata_mode:auto -r "$home/$name" "$@" >"$work/wireshark.log" 2>&1 &
  wpid=$!
  win=
  for _ in $(seq 300); do
    win=$(xdotool search --name "${want_title:-$name}" 2>/dev/null | head -1) && [ -n "$win" ] && break
    kill -0 $wpid 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$win" ]; then
    cat "$work/wireshark.log"; echo "FAIL: no Wireshark window named ${want_title:-$name}"; exit 1
  fi
}
shot() {  # OUT.png: the screen, checked not blank; stderr checked
  kill -0 $wpid 2>/dev/null || { cat "$work/wireshark.log"; echo "FAIL: Wireshark exited"; exit 1; }
  xwd -root -silent -display :$d >"$work/screen.xwd"
  local colours
  colours=$(/usr/bin/python3 "$here/xwd2png.py" "$work/screen.xwd" "$1")
  echo "screenshot: $1 ($colours)"
  # Start-up messages: Qt's and Wireshark's harmless notes are allowed, nothing else.
  grep -vE '(QStandardPaths|qt\.qpa|libEGL|MESA|dbus|Fontconfig|^nl80211 not found)' "$work/wireshark.log" | grep -v '^\s*$' >"$work/errors" || true
  if [ -s "$work/errors" ]; then
    cat "$work/errors"; echo "FAIL: Wireshark wrote to stderr (a plugin error?)"; exit 1
  fi
  local n
  n=$(echo "$colours" | sed -n 's/.*, \([0-9]*\) colours/\1/p')
  [ "${n:-0}" -ge 16 ] || { echo "FAIL: the screen is blank ($colours)"; exit 1; }
}
geometry() {  # W H X Y: resize and move the window, and check that it took them
  xdotool windowsize "$win" "$1" "$2" windowmove "$win" "$3" "$4" || { echo "FAIL: xdotool could not place the window"; exit 1; }
  local g
  for _ in $(seq 20); do
    g=$(xdotool getwindowgeometry "$win")
    echo "$g" | grep -q "Position: $3,$4 " && echo "$g" | grep -q "Geometry: $1x$2" && return 0
    sleep 0.1
  done
  echo "$g"; echo "FAIL: the window is not ${1}x$2 at $3,$4"; exit 1
}
tree_lines() {  # the lines of text in the packet details (rows 540-960 of the 1400x1000 window at 0,0)
  xwd -root -silent -display :$d >"$work/tree.xwd"
  /usr/bin/python3 "$here/xwd2png.py" "$work/tree.xwd" "$work/tree.png" 540 960 | sed -n 's/.*, \([0-9]*\) text lines.*/\1/p'
}
start -g "$frame"
sleep 2
# Focus: windowactivate needs a window manager (Xvfb has none); windowfocus then.
xdotool windowactivate --sync "$win" 2>/dev/null || xdotool windowfocus --sync "$win" ||
  { echo "FAIL: xdotool could not focus the Wireshark window"; exit 1; }
geometry 1400 1000 0 0
sleep 1
# In the packet details: collapse every tree, go to the last one (pushwire's), expand it whole.
# The expansion is checked: the details show more lines after it than before (collapsed, the
# frame's top-level protocols; expanded, pushwire's fields too). Tried three times, as a
# Wireshark that is still laying out its window may miss the keys.
expanded=
for attempt in 1 2 3; do
  xdotool mousemove --window "$win" 300 560 click 1
  sleep 0.5
  xdotool key --window "$win" ctrl+Left End
  sleep $attempt
  before=$(tree_lines)
  xdotool key --window "$win" shift+Right
  sleep $((attempt + 1))
  after=$(tree_lines)
  echo "packet details, attempt $attempt: ${before:-?} lines collapsed, ${after:-?} after expanding pushwire's tree"
  if [ -n "$before" ] && [ -n "$after" ] && [ "$after" -ge $((before + 5)) ]; then expanded=1; break; fi
done
[ -n "$expanded" ] || { cp "$work/tree.png" "$out"; echo "FAIL: pushwire's tree did not expand (the screen is in $out)"; exit 1; }
shot "$out"
echo "PASS: Wireshark started with the plugin, frame $frame of $name shown"
[ -n "$stats" ] || exit 0
kill $wpid; wait $wpid 2>/dev/null || true
want_title="pushwire pools" start -z pushwire,pools
sleep 3
geometry 1100 400 40 120
sleep 1
shot "$stats"
echo "PASS: Statistics > pushwire pools opens"
