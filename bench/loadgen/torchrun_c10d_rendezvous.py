"""torchrun's own rendezvous (--rdzv-backend=c10d) at N agents, for the "as deployed" comparison.

bench/loadgen.sh's "agents" runs stand for torchrun's agents with five C++ TCPStore operations
each (add / set / add / wait / get): a lower bound, close to what the static rendezvous
(--node-rank given, as Slurm scripts often do) and the rank assignment after it cost. torchrun's
default dynamic rendezvous does more: every agent compare-and-sets one pickled state that lists
every node, retries when another agent won, and polls the state once a second while it waits
for the others. This script runs that code itself -- PyTorch's DynamicRendezvousHandler over
C10dRendezvousBackend on a libuv TCPStore -- so that the gap between the two can be measured:

  python bench/loadgen/torchrun_c10d_rendezvous.py [--procs P] [--repeat R] N [N...]

For each N: the store's server alone in its process; N agents spread over P processes (default
2, one thread each, each with its own store client and handler built before the clock starts,
its node address given so that no DNS lookup runs); then every agent calls next_rendezvous() at
once, and the time from that command to the last agent holding its rank is printed with the
compare-and-set calls made (and how many of them lost), the one-second waits taken, and the CPU
seconds of the server and of the agents' processes during it. Python agents share their
process's interpreter lock, so on a small host the agents' CPU is part of what is measured;
the line says how much there was.
"""
import argparse
import multiprocessing as mp
import os
import sys
import threading
import time
from datetime import timedelta

TIMEOUT = timedelta(seconds=600)
RUN_ID = "bench"


def cpu_seconds(pid):
    """User + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(port_queue, stop):
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=TIMEOUT, use_libuv=True)
    port_queue.put(store.port)
    stop.wait()


def agents(port, count, world, ready, go, results):
    import torch.distributed as dist
    import torch.distributed.elastic.rendezvous.dynamic_rendezvous as dr
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler

    lock = threading.Lock()
    counts = {"cas": 0, "cas_lost": 0, "waits_1s": 0}
    set_state = C10dRendezvousBackend.set_state

    def counted_set_state(self, state, token=None):
        reply = set_state(self, state, token)
        with lock:
            counts["cas"] += 1
            counts["cas_lost"] += 0 if reply is not None and reply[2] else 1
        return reply

    C10dRendezvousBackend.set_state = counted_set_state
    delay = dr._delay

    def counted_delay(seconds):
        if seconds == 1:
            with lock:
                counts["waits_1s"] += 1
        delay(seconds)

    dr._delay = counted_delay

    handlers = []
    for _ in range(count):
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT, use_libuv=True)
        backend = C10dRendezvousBackend(store, RUN_ID)
        handlers.append(DynamicRendezvousHandler.from_backend(
            RUN_ID, store, backend, world, world, local_addr="127.0.0.1", timeout=None))
    done = [None] * count
    errors = []

    def run(i):
        go.wait()
        try:
            info = handlers[i].next_rendezvous()
            done[i] = (time.monotonic(), info.rank)
        except Exception as e:  # noqa: BLE001 -- reported, not hidden
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    ready.put(os.getpid())
    for t in threads:
        t.join()
    results.put({"done": done, "errors": errors, **counts})
    results.close()
    results.join_thread()
    # Not handler.shutdown(): that closes the rendezvous for the agents still in it. Their
    # keep-alive timers end with the process.
    os._exit(0)


def one_size(n, procs):
    ctx = mp.get_context("spawn")
    port_queue, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=serve, args=(port_queue, stop))
    server.start()
    port = port_queue.get(timeout=60)
    ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    sizes = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    workers = [ctx.Process(target=agents, args=(port, k, n, ready, go, results))
               for k in sizes if k > 0]
    for w in workers:
        w.start()
    pids = [ready.get(timeout=600) for _ in workers]
    cpu0 = (cpu_seconds(server.pid), sum(cpu_seconds(p) for p in pids))
    t0 = time.monotonic()
    go.set()
    out = [results.get(timeout=3600) for _ in workers]
    cpu1 = (cpu_seconds(server.pid), sum(cpu_seconds(p) for p in pids))
    for w in workers:
        w.join()
    stop.set()
    server.join()
    errors = [e for o in out for e in o["errors"]]
    done = [d for o in out for d in o["done"] if d is not None]
    if errors or len(done) != n:
        return f"error agents={n} done={len(done)} first_error={errors[0] if errors else 'none'!r}"
    ranks = len({r for _, r in done})
    fields = {
        "agents": n, "procs": len(workers),
        "rendezvous_s": round(max(t for t, _ in done) - t0, 3),
        "first_s": round(min(t for t, _ in done) - t0, 3),
        "distinct_ranks": ranks,
        "cas": sum(o["cas"] for o in out), "cas_lost": sum(o["cas_lost"] for o in out),
        "waits_1s": sum(o["waits_1s"] for o in out),
        "server_cpu_s": round(cpu1[0] - cpu0[0], 2), "agents_cpu_s": round(cpu1[1] - cpu0[1], 2),
        "load1_before": os.getloadavg()[0],
    }
    status = "ok" if ranks == n else "error"
    return status + " " + " ".join(f"{k}={v}" for k, v in fields.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="+", type=int, help="agents (torchrun nodes)")
    parser.add_argument("--procs", type=int, default=2, help="agent processes (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size")
    args = parser.parse_args()
    if any(n < 1 for n in args.sizes) or args.procs < 1 or args.repeat < 1:
        parser.error("sizes, --procs and --repeat must be positive")
    failed = False
    for n in args.sizes:
        for _ in range(args.repeat):
            line = one_size(n, args.procs)
            print(line, flush=True)
            failed |= line.startswith("error")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
