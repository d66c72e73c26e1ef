"""The Python TCPStore baseline of ddp-scalebench (--target tcpstore-py).

Speaks the driver's line protocol (bench/loadgen/agent_line.h) on stdin/stdout, exactly as the
C++ baseline (ddp-tcpstore-bench) does, so the driver times the same phases the same way:

  --serve --world N     torch.distributed.TCPStore's server, alone in its process; prints
                        `ok port=P`, then `ok ready=yes`, then waits for `quit` or EOF.
  --port P --first I --count K --world N
                        ranks [I, I+K), one Python thread and one TCPStore connection each.
                        `connect`: every thread builds its store (connect, handshake, the
                        "init/" count of a store with a world size); `rendezvous`: every rank
                        takes a rank (add), publishes an address (set), counts in (add; the last
                        sets "go"), waits for "go" and reads the shard parameters (get).

Replies carry done_ns (CLOCK_MONOTONIC, shared by every process on the host) and per-rank
latency quantiles. Python threads share one interpreter lock, which is why the C++ baseline
exists; this one shows what a Python launcher sees.
"""
import argparse
import resource
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

SHARD_PARAMS = b"dataset_size=1281167 seed=0 shuffle=1 epoch=0"


def reply(fields):
    print("ok " + " ".join(f"{k}={v}" for k, v in fields), flush=True)


def error(message):
    print("error " + message.replace("\n", " "), flush=True)


def summary(key, ms):
    ms = sorted(ms)
    if not ms:
        return [(f"{key}_n", 0), (f"{key}_p50_ms", 0), (f"{key}_p99_ms", 0), (f"{key}_max_ms", 0)]
    at = lambda p: ms[min(len(ms) - 1, int(p * len(ms)))]  # noqa: E731
    return [(f"{key}_n", len(ms)), (f"{key}_p50_ms", f"{at(0.5):.6g}"),
            (f"{key}_p99_ms", f"{at(0.99):.6g}"), (f"{key}_max_ms", f"{ms[-1]:.6g}")]


def commands():
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            return
        if command:
            yield command


class Tally:
    def __init__(self, n):
        self.cv = threading.Condition()
        self.remaining = n
        self.ms = []
        self.errors = []
        self.last_ns = 0

    def record(self, start_ns, err=None):
        now = time.monotonic_ns()
        with self.cv:
            if err is None:
                self.ms.append((now - start_ns) / 1e6)
            else:
                self.errors.append(err)
            self.last_ns = max(self.last_ns, now)
            self.remaining -= 1
            self.cv.notify_all()

    def finish(self, timeout_s):
        with self.cv:
            self.cv.wait_for(lambda: self.remaining == 0, timeout=timeout_s)
            failed = len(self.errors) + self.remaining
            if failed:
                first = self.errors[0] if self.errors else "phase timed out"
                error(f"{failed} ranks failed; the first: {first}")
                return
            reply([("done_ns", self.last_ns), ("failed", 0)] + summary("lat", self.ms))


def serve(args):
    store = dist.TCPStore("127.0.0.1", 0, args.world, True, timedelta(seconds=args.timeout),
                          wait_for_workers=False)
    store.set("shard_params", SHARD_PARAMS)
    reply([("port", store.port)])
    reply([("ready", "yes")])
    for command in commands():
        error(f"unknown command '{command}'")


def ranks(args):
    threading.stack_size(256 << 10)
    connect, rendezvous = Tally(args.count), Tally(args.count)
    gate = threading.Event()
    quit_ = threading.Event()
    gate_ns = [0]

    def rank_main(index):
        start = time.monotonic_ns()
        try:
            store = dist.TCPStore("127.0.0.1", args.port, args.world, False,
                                  timedelta(seconds=args.timeout))
            connect.record(start)
        except Exception as e:  # noqa: BLE001 -- reported to the driver
            connect.record(start, f"connect: {e!r}")
            rendezvous.record(start, "no connection")
            return
        gate.wait()
        if quit_.is_set():
            return
        try:
            g = args.first + index
            rank = store.add("rank", 1) - 1
            store.set(f"addr/{rank}", f"node{g // 8}:{g % 8}")
            if store.add("joined", 1) == args.world:
                store.set("go", "1")
            store.wait(["go"])
            store.get("shard_params")
            rendezvous.record(gate_ns[0])
        except Exception as e:  # noqa: BLE001
            rendezvous.record(gate_ns[0], f"rendezvous: {e!r}")
        quit_.wait()  # keep the connection, as a rank keeps its store

    threads = []
    reply([("ready", "yes")])
    try:
        for command in commands():
            if command == "connect":
                threads = [threading.Thread(target=rank_main, args=(i,), daemon=True)
                           for i in range(args.count)]
                for t in threads:
                    t.start()
                connect.finish(args.timeout + 5)
            elif command == "rendezvous":
                gate_ns[0] = time.monotonic_ns()
                gate.set()
                rendezvous.finish(args.timeout + 5)
            else:
                error(f"unknown command '{command}'")
    finally:
        quit_.set()
        gate.set()
        for t in threads:
            t.join(timeout=args.timeout)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--serve", action="store_true")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--phase-timeout", dest="timeout", type=int, default=120)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.serve:
        serve(args)
    elif args.port > 0 and args.count > 0 and 0 <= args.first and args.first + args.count <= args.world:
        ranks(args)
    else:
        sys.exit("tcpstore_rendezvous.py: rank mode needs --port and ranks inside the world")


if __name__ == "__main__":
    main()
