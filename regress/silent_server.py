#!/usr/bin/env python3
"""A TCP server that accepts connections and never answers (regression tests of waits).

Prints its port on stdout, then serves until killed or until --seconds pass.
"""
import argparse
import socket
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.5)
    print(listener.getsockname()[1], flush=True)
    held = []  # keep accepted connections open, silent
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        try:
            conn, _ = listener.accept()
            held.append(conn)
        except socket.timeout:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
