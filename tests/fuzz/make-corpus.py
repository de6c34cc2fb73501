#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the seed corpus of tests/fuzz/ (corpus/<target>/): small inputs
made from valid messages, laid out the way each target reads its input (see
the comment at the top of each fuzz-*.c).  Run it again after a format
changes; the fuzzers grow the corpus from these by themselves."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

BLOCK_MAGIC = 0x42524253
PRIV_MAGIC = 0x53425243
SHM_CTRL_MAGIC = 0x4D485342
DATA, CAPS, EOS = 1, 2, 3
FIRST, LAST, SPAN = 1, 2, 32


def block(kind, device, flags, packet, epoch, payload, seq, frame_offset=0,
          frame_size=None, size=256):
    if frame_size is None:
        frame_size = len(payload)
    hdr = struct.pack('<IBBBBHHIQQQQQII', BLOCK_MAGIC, 1, kind, device, flags,
                      packet, epoch, len(payload), seq, 1000, 1000, 40, 5,
                      frame_offset, frame_size)
    b = hdr + payload + struct.pack('<Q', seq)
    return b + bytes(size - len(b))


def connect_priv(mech=0, version=2):
    return struct.pack('<IBBHII', PRIV_MAGIC, version, mech, 0, 0, 0)


def accept_priv(mech=0, epoch=1, bs=256, bc=4, blocks=28672, status=24576,
                pause=64, version=2):
    return struct.pack('<IBBHIIQQIIII', PRIV_MAGIC, version, mech, epoch, bs,
                       bc, blocks, status, 0x11, 0x22, 0, pause)


def seeds_block():
    s = {}
    s['data-whole'] = b'\x00' + struct.pack('<H', 7) + block(
        DATA, 3, FIRST | LAST, 9, 7, b'frame-payload!!!', 5)
    s['data-first-fragment'] = b'\x00' + struct.pack('<H', 7) + block(
        DATA, 3, FIRST, 9, 7, b'x' * 100, 6, 0, 300)
    s['data-last-fragment-masked'] = b'\x02' + struct.pack('<H', 7) + \
        b'\xff' * 32 + block(DATA, 3, LAST, 9, 7, b'y' * 100, 8, 200, 300)
    s['caps'] = b'\x00' + struct.pack('<H', 1) + block(
        CAPS, 0, 0, 0, 1, b'video/x-raw,format=RGB', 1, 0, 0)
    s['eos'] = b'\x00' + struct.pack('<H', 1) + block(EOS, 0, 0, 4, 1, b'', 2,
                                                      0, 0)
    # Round trip: kind device flags packet epoch size+ len seq pts dts
    # duration capture offset frame_size.
    s['round-trip'] = b'\x01' + struct.pack('<BBBHHHIQQQQQII', DATA, 2,
                                            FIRST | LAST, 1, 1, 184, 100, 3,
                                            0, 0, 40, 0, 0, 100)
    # Spans (mode 4): u16 block size - 72, u16 epoch, then a lane of four
    # 256-byte blocks with a span of two at its start.
    s['span-hostile'] = b'\x04' + struct.pack('<HH', 184, 7) + block(
        DATA, 3, FIRST | LAST | SPAN, 9, 7, b's' * 300, 5, size=1024)
    # Span round trip (mode 5): bs - 72, epoch, device, flags, payload_len,
    # seq, lane blocks - 1.
    s['span-round-trip'] = b'\x05' + struct.pack('<HHBBIQB', 184, 7, 2, 0,
                                                 700, 11, 7)
    return s


def reject_priv(reason=6, retryable=1, rx=4, tx=0):
    return struct.pack('<IBBBBII', 0x52524253, 1, reason, retryable, 0, rx, tx)


def seeds_priv():
    return {
        'reject-full': b'\x02' + reject_priv(),
        'reject-unknown-reason': b'\x02' + reject_priv(reason=200,
                                                       retryable=0),
        'connect': b'\x00' + connect_priv(),
        'connect-sliding-window': b'\x00' + connect_priv(1),
        'connect-v1': b'\x00' + connect_priv(version=1),
        'accept': b'\x01' + accept_priv(),
        'accept-big-lane': b'\x01' + accept_priv(bs=1 << 20, bc=16, pause=64),
        # R = P + 32, features: key units, K = R + 32.
        'accept-key-unit': b'\x01' + accept_priv() +
        struct.pack('<III', 96, 2, 128),
    }


OP_CONNECT, OP_FORGE, OP_RAW, OP_STATUS, OP_NEXT_FRAME, OP_NEXT_BLOCK, \
    OP_RELEASE, OP_HOLD, OP_DISCONNECT, OP_PAUSE = range(10)


def forge(index, kind, device, flags, packet, payload, frame_offset,
          frame_size, seq_delta=0, how=0):
    return bytes([OP_FORGE, 0]) + struct.pack(
        '<HBBBBHBQHH', index, how, kind, device, flags, packet, len(payload),
        1000 * packet, frame_offset, frame_size) + struct.pack(
            'b', seq_delta) + payload


def nxt(keep=0, frame=True, n=1):
    return bytes([OP_NEXT_FRAME if frame else OP_NEXT_BLOCK, keep]) * n


def seeds_reassembly():
    s = {}
    # setup 2: 4 blocks, one lane.  Connect, let the lane open, one frame.
    opening = b'\x02' + bytes([OP_CONNECT, 0]) + nxt()
    s['one-frame'] = opening + forge(0, DATA, 0, FIRST | LAST, 0,
                                     b'p' * 16, 0, 16) + nxt(n=3)
    frag = b''.join(
        forge(i, DATA, 1, (FIRST if i == 0 else 0) | (LAST if i == 2 else 0),
              i, bytes([65 + i]) * 100, 100 * i, 300) for i in range(3))
    s['three-fragments'] = opening + frag + nxt(keep=1, n=4) + \
        bytes([OP_HOLD, 0, OP_RELEASE, 0])
    # Two devices interleaved, blocks out of order, a CAPS and an EOS.
    s['two-devices'] = opening + forge(1, DATA, 2, FIRST | LAST, 0, b'b' * 8,
                                       0, 8, seq_delta=1) + \
        forge(0, CAPS, 1, 0, 0, b'video/x-raw', 0, 0, seq_delta=-2) + \
        forge(2, EOS, 2, 0, 1, b'', 0, 0) + nxt(frame=False, keep=1, n=4) + \
        bytes([OP_PAUSE, 0x81, OP_DISCONNECT, 0]) + nxt(n=2)
    # setup 0x0a: 4 blocks, two lanes.  Six fragments through four blocks:
    # reassembly has to switch to a copy.
    two = b'\x0a' + bytes([OP_CONNECT, 0, OP_CONNECT, 0]) + nxt()
    big = b''
    for i in range(6):
        flags = (FIRST if i == 0 else 0) | (LAST if i == 5 else 0)
        big += forge(i % 4, DATA, 0, flags, i, bytes([i]) * 150, 150 * i, 900)
        big += nxt(keep=1)
    s['copied-frame'] = two + big + bytes([OP_RELEASE, 0]) * 3
    s['garbage-and-status'] = opening + bytes([OP_RAW, 0, 0, 0, 8]) + \
        b'SBRB\x01\x01\x00\x03' + bytes([OP_STATUS, 0, 1, 0, 1]) + nxt(n=2)
    return s


def shm_segment_image():
    ctrl = bytearray(576)
    struct.pack_into('<III', ctrl, 0, SHM_CTRL_MAGIC, 2, 24576)
    struct.pack_into('<II', ctrl, 64 + 192, 16, 576)   # to_receiver slots
    struct.pack_into('<II', ctrl, 320 + 192, 256, 1856)  # to_sender slots
    return bytes(ctrl)


def ring_messages():
    # what=0, head=1, then four slots: a SEND of 8 bytes, three empty.
    msg = struct.pack('<IIBB6x', 0, 8, 0, 1) + b'8 bytes!'
    return b'\x00\x01' + bytes([8]) + msg + bytes([0]) + bytes(16) * 1 + \
        bytes([0]) + bytes(16) + bytes([0]) + bytes(16)


def seeds_shm():
    s = {}
    req = b'C\x00\x00\x00' + connect_priv()
    s['sender-accepted'] = b'\x04' + bytes([len(req)]) + req + \
        ring_messages() + b'\x01\x02'
    s['sender-rejected'] = b'\x00' + bytes([len(req)]) + req
    # A forged receive ring whose head is far past its tail.
    s['sender-ring-corrupt'] = b'\x04' + bytes([len(req)]) + req + b'\x01' + \
        struct.pack('<I', 1000) + bytes(8)
    v1 = b'C\x00\x00\x00' + connect_priv(version=1)
    s['sender-v1'] = b'\x00' + bytes([len(v1)]) + v1
    ans = b'A\x00\x00\x00' + accept_priv()
    image = shm_segment_image()
    s['receiver-valid-lane'] = b'\x03' + bytes([len(ans)]) + ans + \
        struct.pack('<IH', 29696, len(image)) + image + b'\x00' + \
        ring_messages() + b'\x01\x00'
    s['receiver-unsealed'] = b'\x07' + bytes([len(ans)]) + ans + \
        struct.pack('<IH', 29696, len(image)) + image + b'\x00'
    s['receiver-refuses'] = b'\x01' + bytes([4]) + b'R\x00\x00\x00'
    rej = b'R\x00\x00\x00' + reject_priv()
    s['receiver-refuses-with-reason'] = b'\x01' + bytes([len(rej)]) + rej
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'corpus')
    for target, seeds in (('fuzz-block', seeds_block()),
                          ('fuzz-priv', seeds_priv()),
                          ('fuzz-reassembly', seeds_reassembly()),
                          ('fuzz-shm', seeds_shm())):
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, 'seed-' + name), 'wb') as f:
                f.write(data)


if __name__ == '__main__':
    main()
