"""Garbage on pushwire-rnicd's control socket (spec/rnicd.md §4, §6), encoded here from the spec's
tables, not by pushwire's codec: every malformed message is refused with its named error and the
device process keeps serving. usage: rnicd_garbage.py SOCKET"""
import os
import random
import socket
import struct
import sys

# fn_errc (spec/rnicd.md §6)
BAD_MESSAGE, UNSUPPORTED_VERSION, NO_SUCH_FUNCTION, NOT_PERMITTED, BAD_SETTING = 1, 2, 3, 6, 11
# msg_type (spec/rnicd.md §4)
ATTACH, ATTACHED, RESERVE, RESERVED, COMMAND, OUTPUT = 1, 2, 3, 4, 5, 6
MIGRATE_OFFER, MIGRATE_READY, MIGRATE_ATTACHMENT, MIGRATE_COMMIT, MIGRATE_COMMITTED = 9, 10, 11, 12, 13


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(3)
    s.connect(path)
    return s


def header(kind, version=1, status=0, tag=0):
    return struct.pack(">HHHH", kind, version, status, tag)


def ask(s, msg):
    s.send(msg)
    r = s.recv(70000)
    kind, version, status, tag = struct.unpack(">HHHH", r[:8])
    return kind, status, tag, r[8:]


def expect(what, got, kind, status):
    if got[0] != kind or got[1] != status:
        sys.exit(f"FAIL: {what}: got type {got[0]} status {got[1]}, want type {kind} status {status}")


def main():
    path = sys.argv[1]
    rng = random.Random(7)
    s = connect(path)
    refused = 0
    for i in range(300):
        n = rng.randrange(1, 200)
        msg = bytes(rng.randrange(256) for _ in range(n))
        if i % 3 == 0 and n >= 8:  # a header of version 1 before random bytes
            msg = header(rng.randrange(0, 14), 1, 0, i) + msg[8:]
        r = ask(s, msg)
        if r[1] == 0 and r[0] != OUTPUT:
            sys.exit(f"FAIL: {msg.hex()} was taken (type {r[0]})")
        refused += r[1] != 0
    expect("version 2", ask(s, header(COMMAND, 2) + b"show"), OUTPUT, UNSUPPORTED_VERSION)
    expect("shorter than a header", ask(s, b"\x00\x05\x00"), OUTPUT, BAD_MESSAGE)
    expect("longer than 64 KiB", ask(s, header(COMMAND) + bytes(70000)), OUTPUT, BAD_MESSAGE)
    expect("attach to function 999", ask(s, header(ATTACH, tag=5) + struct.pack(">HHI", 999, 0, 1)), ATTACHED, NO_SUCH_FUNCTION)
    expect("attach, truncated", ask(s, header(ATTACH) + b"\x00"), ATTACHED, BAD_MESSAGE)
    expect("reserve, not attached", ask(s, header(RESERVE) + struct.pack(">BBHQ", 1, 0, 0, 1)), RESERVED, BAD_MESSAGE)
    expect("vf add 200", ask(s, header(COMMAND) + b"vf\0add\0200"), OUTPUT, BAD_SETTING)
    expect("vf set 1 mac 01:00:00:00:00:01", ask(s, header(COMMAND) + b"vf\0set\x001\0mac\x0001:00:00:00:00:01"), OUTPUT, BAD_SETTING)
    expect("an unknown command", ask(s, header(COMMAND) + b"reboot"), OUTPUT, BAD_SETTING)
    # (spec/migration.md) a function's attachment with no function offered, a commit of nothing
    expect("migrate_attachment with no offer", ask(s, header(MIGRATE_ATTACHMENT) + bytes(40)), OUTPUT, BAD_MESSAGE)
    expect("migrate_commit with no offer", ask(s, header(MIGRATE_COMMIT)), MIGRATE_COMMITTED, BAD_MESSAGE)
    expect("migrate_offer, truncated", ask(s, header(MIGRATE_OFFER) + b"\x00\x01"), MIGRATE_READY, BAD_MESSAGE)
    ok = ask(s, header(COMMAND, tag=9) + b"show")
    if ok[1] != 0 or ok[2] != 9 or b"pf:" not in ok[3]:
        sys.exit("FAIL: show after the garbage")
    s.close()
    # A zero-length message ends the connection; the device serves the next one.
    z = connect(path)
    z.send(b"")
    if z.recv(100) != b"":
        sys.exit("FAIL: a zero-length message did not end its connection")
    z.close()
    s = connect(path)
    if ask(s, header(COMMAND) + b"show")[1] != 0:
        sys.exit("FAIL: a new connection after the garbage")
    # A user neither root nor the device process's may look, not change.
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            u = connect(path)
            looked = ask(u, header(COMMAND) + b"show")[1] == 0
            changed = ask(u, header(COMMAND) + b"vf\0add\x002")
            offered = ask(u, header(MIGRATE_OFFER) + bytes(120))
            os._exit(0 if looked and changed[0] == OUTPUT and changed[1] == NOT_PERMITTED and offered[0] == MIGRATE_READY and
                     offered[1] == NOT_PERMITTED else 1)
        except Exception as e:  # noqa: BLE001 (the child reports by its status)
            print("child:", e)
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("FAIL: a user neither root nor the device process's changed a function, or could not show")
    print(f"ok: 300 random messages ({refused} refused, the rest answered), "
          "each malformed kind refused with its named error, vf add and migrate_offer by uid 65534 not_permitted; "
          "the device serves on")


main()
