#!/usr/bin/env python3
"""Independent source of the cell vectors in vectors.hpp: a bitwise CRC-32C and the layout of
spec/cells.md spelled by hand. Prints each frame as hex rows. Not run by ctest; rerun it after a
deliberate format change and paste the rows."""
def crc32c(b, crc=0):
    crc ^= 0xFFFFFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283


def main():
    def be32(v): return v.to_bytes(4,'big')
    eth = bytes.fromhex("020000000002 020000000001 88b5")
    def hdr(typ, flags, dst, src, psn, csn, cnt, ln):
        return bytes([0x10|typ, flags]) + dst.to_bytes(3,'big') + src.to_bytes(3,'big') + b"\0" + psn.to_bytes(3,'big') + csn.to_bytes(2,'big') + cnt.to_bytes(2,'big') + ln.to_bytes(2,'big')
    # The packet CRC covers each cell's bytes before its CRC fields, across the packet's cells.
    def packet(cells_parts):
        frames, covered = [], b""
        for i, parts in enumerate(cells_parts):
            f = eth + b"".join(parts)
            covered += f
            if i == len(cells_parts) - 1: f += be32(crc32c(covered))
            f += be32(crc32c(f))
            if len(f) < 60: f += bytes(60-len(f))
            frames.append(f)
        return frames
    out = {}
    out['send'], = packet([[hdr(0,0xD0,0x22,0x11,0x64,0,1,4), b"ping"]])
    data = bytes(range(20))
    out['write_first'], out['write_middle'], out['write_last'] = packet([
        [hdr(1,0x88,0x22,0x11,0x1F4,0,3,8), (0x00007f0000010500).to_bytes(8,'big'), be32(0x1234), data[0:8]],
        [hdr(1,0x00,0x22,0x11,0x1F4,1,3,8), data[8:16]],
        [hdr(1,0x60,0x22,0x11,0x1F4,2,3,4), be32(0x07050100), data[16:20]]])
    out['ack'], = packet([[hdr(2,0xC0,0x11,0x22,0x1F4,0,1,0), bytes(8)]])
    out['nak'], = packet([[hdr(3,0xC0,0x11,0x22,0x1F4,0,1,0), bytes([2,0,0,0]) + be32(0)]])
    out['pfd'], = packet([[hdr(4,0xC0,0x11,0x22,0x1F5,0,1,0), bytes([0,0,0,0]) + be32(2000)]])
    for k,v in out.items():
        h = v.hex()
        print(k, len(v))
        # groups of 16 bytes
        print('\n'.join('    "' + ' '.join(h[i+j:i+j+2] for j in range(0,min(32,len(h)-i),2)) + '"' for i in range(0,len(h),32)))


if __name__ == "__main__":
    main()
