#!/usr/bin/python3
"""Link probe for scripts/cluster.sh: TCP round-trip time and bulk throughput between two
cluster nodes (the machine has no ping or iperf). Standard library only.

    cluster_probe.py server --bind 10.77.0.2            (serves one client, then exits)
    cluster_probe.py client --host 10.77.0.2 [--megabytes 24] [--pings 200]

The client prints one line: "rtt median X ms (min Y ms) over P round trips | Z MB/s
(W Mbit/s) for M MB". RTT is a 1-byte request/answer on a TCP_NODELAY socket, so it
includes both kernels' TCP processing, as an MPI small message would.
"""
import argparse
import socket
import statistics
import struct
import sys
import time

PORT = 47701
CHUNK = 1 << 16


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(min(CHUNK, n - len(buf)))
        if not part:
            raise ConnectionError("peer closed the connection")
        buf += part
    return bytes(buf)


def serve(bind):
    with socket.create_server((bind, PORT), reuse_port=False) as listener:
        listener.settimeout(30)
        conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pings = struct.unpack("!I", recv_exact(conn, 4))[0]
        for _ in range(pings):
            conn.sendall(recv_exact(conn, 1))
        total = struct.unpack("!Q", recv_exact(conn, 8))[0]
        left = total
        while left > 0:
            part = conn.recv(min(CHUNK * 4, left))
            if not part:
                raise ConnectionError("peer closed during the bulk transfer")
            left -= len(part)
        conn.sendall(b"k")


def connect(host, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while True:  # the server may still be starting
        try:
            return socket.create_connection((host, PORT), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def client(host, megabytes, pings):
    with connect(host) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(struct.pack("!I", pings))
        rtts = []
        for _ in range(pings):
            start = time.perf_counter()
            sock.sendall(b"p")
            recv_exact(sock, 1)
            rtts.append(time.perf_counter() - start)
        total = int(megabytes * 1e6)
        payload = b"\0" * (CHUNK * 4)
        start = time.perf_counter()
        sock.sendall(struct.pack("!Q", total))
        left = total
        while left > 0:
            n = min(len(payload), left)
            sock.sendall(payload[:n])
            left -= n
        recv_exact(sock, 1)
        seconds = time.perf_counter() - start
    rate = total / seconds
    print(f"rtt median {statistics.median(rtts) * 1e3:.3f} ms (min {min(rtts) * 1e3:.3f} ms) "
          f"over {pings} round trips | {rate / 1e6:.2f} MB/s ({rate * 8 / 1e6:.1f} Mbit/s) "
          f"for {megabytes:g} MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", required=True)
    c = sub.add_parser("client")
    c.add_argument("--host", required=True)
    c.add_argument("--megabytes", type=float, default=24)
    c.add_argument("--pings", type=int, default=200)
    args = parser.parse_args()
    # No round trip has no median, and no bytes no rate: refused before connecting (they
    # ended in a traceback: review, 2026-12-06).
    if args.mode == "client" and args.pings < 1:
        parser.error(f"--pings must be at least 1, got {args.pings}")
    if args.mode == "client" and not args.megabytes > 0:
        parser.error(f"--megabytes must be above 0, got {args.megabytes:g}")
    if args.mode == "server":
        serve(args.bind)
    else:
        client(args.host, args.megabytes, args.pings)


if __name__ == "__main__":
    sys.exit(main())
