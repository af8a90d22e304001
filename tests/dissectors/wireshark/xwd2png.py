#!/usr/bin/python3
"""Converts an X window dump (xwd -root, TrueColor ZPixmap, 24 or 32 bits per pixel) to PNG, and
says how many distinct colours it holds (a blank screen has one). With Y0 Y1, also how many lines
of dark text rows Y0 to Y1 hold: runs of pixel rows with a dark pixel (the lines of a tree view).
usage: xwd2png.py IN.xwd OUT.png [Y0 Y1]"""
import struct
import sys

from PIL import Image

data = open(sys.argv[1], "rb").read()
(header_size, _version, fmt, _depth, width, height, _xoff, byte_order, _unit, _bit_order, _pad, bpp, bytes_per_line,
 _visual, red, green, blue, _bits_rgb, _cmap, ncolors) = struct.unpack(">20I", data[:80])
if fmt != 2 or bpp not in (24, 32):
    sys.exit(f"xwd2png: ZPixmap of 24 or 32 bits per pixel expected, got format {fmt}, {bpp} bits")
pixels = data[header_size + 12 * ncolors:]
order = {(0xFF0000, 0xFF00, 0xFF): "BGRX" if byte_order == 0 else "XRGB",
         (0xFF, 0xFF00, 0xFF0000): "RGBX" if byte_order == 0 else "XBGR"}.get((red, green, blue))
if not order:
    sys.exit(f"xwd2png: colour masks {red:#x} {green:#x} {blue:#x} not handled")
if bpp == 24:
    order = order.replace("X", "")
img = Image.frombuffer("RGB", (width, height), pixels, "raw", order, bytes_per_line, 1)
img.save(sys.argv[2])
colours = img.getcolors(maxcolors=1 << 20)
lines = ""
if len(sys.argv) == 5:
    y0, y1 = max(0, int(sys.argv[3])), min(height - 1, int(sys.argv[4]))
    grey = img.convert("L")
    dark = [any(v < 96 for v in grey.crop((0, y, width, y + 1)).getdata()) for y in range(y0, y1 + 1)]
    n = sum(1 for i, d in enumerate(dark) if d and (i == 0 or not dark[i - 1]))
    lines = f", {n} text lines in rows {y0}-{y1}"
print(f"{width}x{height}, {len(colours) if colours else 'over a million'} colours{lines}")
