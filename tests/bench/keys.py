"""Sends COMMAND ARGS... <prefix><i> for i in 0..N over a Unix socket,
pipelined in batches, and waits for every reply. Used by socket.sh to grow a
server by N distinct keys (memory per key).

Usage: python3 keys.py SOCKET N COMMAND [ARGS...]
"""
import socket
import sys


def frame(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def main():
    path, n, command = sys.argv[1], int(sys.argv[2]), [a.encode() for a in sys.argv[3:]]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    batch = 1000
    for start in range(0, n, batch):
        count = min(batch, n - start)
        s.sendall(b"".join(frame(command + [b"key:%012d" % i]) for i in range(start, start + count)))
        # Every reply ends in \r\n; THROTTLE's is an array of 5 integers (6 lines),
        # INCR's one integer (1 line): count lines until all replies are in.
        per = 6 if command[0].upper() == b"THROTTLE" else 1
        want, seen, last = count * per, 0, b""
        while seen < want:
            chunk = s.recv(1 << 16)
            if not chunk:
                sys.exit("server closed the connection")
            joined = last + chunk  # a \r\n split across two reads counts once
            if joined.startswith(b"-") or b"\r\n-" in joined:
                sys.exit("error reply: %r" % joined[:200])
            seen += joined.count(b"\r\n") - last.count(b"\r\n")
            last = joined[-2:]
    s.close()


if __name__ == "__main__":
    main()
