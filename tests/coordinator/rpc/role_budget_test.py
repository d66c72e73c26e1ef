"""Budgets by role, against the real ddp-coordinator binary over real sockets (Python grpcio).

  view_flood     A 2-worker job heartbeats every 100 ms while a neighbour holding the view token
                 (the one a dashboard URL shares) opens 2,000 WatchStatus and GetStatus streams
                 over 40 connections and never sends their requests (reopening each one that
                 ends), and hammers GetStatus and Hello. The worker token's calls have a budget
                 of their own: no heartbeat is refused or late (p99 measured before and during the
                 flood), no rank is lost, `ddpctl status --json` shows the job RUNNING with both
                 ranks. The neighbour is held to its address's budget, and its silent streams are
                 cancelled after the first-message timeout.
  store_cancel   A worker fills the worker budget (--max-worker-calls) with parked StoreGet calls
                 of a 60 s timeout, then cancels half and drops the connection of the other half:
                 every slot comes back at once (a heartbeat is admitted within a second), not at
                 the calls' own timeout.

Usage: role_budget_test.py CASE (DDP_BIN_DIR names the folder of ddp-coordinator and ddpctl).
Internal: role_budget_test.py flood DIST_FILE SECONDS (the neighbour, in a process of its own).
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
except ImportError:
    print("SKIP: this python has no grpcio (setup-deps installs python3-grpcio)", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_outsider as go  # noqa: E402

STREAMS = 2000
CONNECTIONS = 40
FIRST_MESSAGE_TIMEOUT_S = 2


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else float("nan")


# --- the job's workers -------------------------------------------------------------------------

class Worker:
    """One rank: registers, then heartbeats every 100 ms on a connection of its own, timing each
    call; any failed heartbeat is recorded with its code."""

    def __init__(self, dist, node_rank):
        self.dist = dist
        self.node_rank = node_rank
        self.pid = 4000 + node_rank
        self.ch = go.channel(dist)
        self.rank = None
        self.samples = []  # (start time, seconds)
        self.failures = []  # (start time, code, details)
        self.stop = threading.Event()
        self.thread = None

    def register(self):
        reply = go.unary(self.ch, "Register")(
            go.register_request("budget-node%d" % self.node_rank, self.node_rank,
                                self.dist["nonce"], self.pid),
            metadata=go.bearer(self.dist["token"]), timeout=30)
        self.rank = go.decode(reply).get(1, [0])[0]

    def beat_forever(self):
        beat = go.unary(self.ch, "Heartbeat")
        step = 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                beat(go.heartbeat_request(self.rank, self.pid, step),
                     metadata=go.bearer(self.dist["token"]), timeout=5)
                self.samples.append((t0, time.monotonic() - t0))
            except grpc.RpcError as e:
                self.failures.append((t0, e.code(), e.details()))
            step += 1
            self.stop.wait(max(0.0, 0.1 - (time.monotonic() - t0)))

    def start(self):
        self.thread = threading.Thread(target=self.beat_forever, daemon=True)
        self.thread.start()

    def join(self):
        self.stop.set()
        self.thread.join(timeout=10)

    def latencies(self, since, until):
        return [s for t, s in self.samples if since <= t < until]


def start_job(co):
    workers = [Worker(co.dist, n) for n in range(2)]
    regs = [threading.Thread(target=w.register) for w in workers]
    for t in regs:
        t.start()
    for t in regs:
        t.join(timeout=40)
    if any(w.rank is None for w in workers):
        fail("the workers did not register")
    for w in workers:
        w.start()
    return workers


# --- the neighbour -----------------------------------------------------------------------------

async def flood(dist_file, seconds):
    dist = go.read_dist_file(dist_file)
    md = go.bearer(dist["view_token"])
    chans = [go.channel(dist, aio=True) for _ in range(CONNECTIONS)]
    end = time.monotonic() + seconds
    outcome = {}  # "code: details" -> count
    admitted_for = []  # seconds a stream the server admitted stayed open before it ended

    def count(key):
        outcome[key] = outcome.get(key, 0) + 1

    async def silent_stream(i):
        # A stream whose request never comes; reopened after it ends, until the flood ends.
        method = "WatchStatus" if i % 4 else "GetStatus"
        ch = chans[i % CONNECTIONS]
        while time.monotonic() < end:
            t0 = time.monotonic()
            call = ch.stream_stream(go.SERVICE + method, request_serializer=None,
                                    response_deserializer=None)(metadata=md)
            try:
                code = await asyncio.wait_for(call.code(), timeout=max(0.1, end - t0))
            except asyncio.TimeoutError:
                call.cancel()
                return
            details = await call.details()
            count("%s: %s" % (code.name, details))
            if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                admitted_for.append(time.monotonic() - t0)
            await asyncio.sleep(0.5)

    async def unary_storm(i):
        ch = chans[i % CONNECTIONS]
        get_status = ch.unary_unary(go.SERVICE + ("GetStatus" if i % 2 else "Hello"),
                                    request_serializer=None, response_deserializer=None)
        while time.monotonic() < end:
            try:
                await get_status(b"", metadata=md, timeout=5)
                count("unary OK")
            except grpc.RpcError as e:
                count("unary %s" % e.code().name)
            await asyncio.sleep(0.01)

    tasks = [asyncio.ensure_future(silent_stream(i)) for i in range(STREAMS)]
    tasks += [asyncio.ensure_future(unary_storm(i)) for i in range(8)]
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({"outcome": outcome, "admitted_for": sorted(admitted_for)}), flush=True)
    os._exit(0)  # the channels' own shutdown is not what is measured


def view_flood(bin_dir, work):
    co = go.Coordinator(bin_dir, work, "budget", 2, "--heartbeat-timeout", "3",
                        "--first-message-timeout", str(FIRST_MESSAGE_TIMEOUT_S))
    try:
        workers = start_job(co)
        t_base = time.monotonic()
        time.sleep(3)
        t_flood = time.monotonic()
        seconds = 3 * FIRST_MESSAGE_TIMEOUT_S + 4
        neighbour = subprocess.run([sys.executable, os.path.abspath(__file__), "flood",
                                    co.dist_file, str(seconds)],
                                   capture_output=True, text=True, timeout=seconds + 60)
        t_after = time.monotonic()
        time.sleep(1)
        for w in workers:
            w.join()
        if neighbour.returncode != 0 or not neighbour.stdout.strip():
            fail("the flood did not run: %s" % neighbour.stderr[-2000:])
        report = json.loads(neighbour.stdout.strip().splitlines()[-1])

        base = [s for w in workers for s in w.latencies(t_base, t_flood)]
        during = [s for w in workers for s in w.latencies(t_flood, t_after)]
        failures = [f for w in workers for f in w.failures]
        print("heartbeats: %d before the flood, p99 %.1f ms, max %.1f ms" %
              (len(base), 1e3 * p99(base), 1e3 * max(base)))
        print("heartbeats: %d during the flood, p99 %.1f ms, max %.1f ms" %
              (len(during), 1e3 * p99(during), 1e3 * max(during) if during else float("nan")))
        print("flood outcome:", json.dumps(report["outcome"], indent=1))
        admitted = report["admitted_for"]
        if admitted:
            print("flood: %d streams admitted, then ended after %.1f..%.1f s" %
                  (len(admitted), admitted[0], admitted[-1]))

        if failures:
            fail("%d heartbeats failed during the flood, first: %s %s" %
                 (len(failures), failures[0][1], failures[0][2]))
        # 10 s of heartbeats every 100 ms per worker: most of them must have been answered.
        if len(during) < 2 * 0.6 * (t_after - t_flood) / 0.1:
            fail("only %d heartbeats answered during the flood" % len(during))
        bound = max(0.5, 10 * p99(base))
        if p99(during) > bound:
            fail("heartbeat p99 %.1f ms during the flood, over %.1f ms (p99 before: %.1f ms)" %
                 (1e3 * p99(during), 1e3 * bound, 1e3 * p99(base)))
        if not co.alive():
            fail("the coordinator died")

        # The neighbour was held to its address's budget, and its silent streams were cancelled
        # after the first-message timeout (their slots came back).
        per_address = sum(n for k, n in report["outcome"].items()
                          if "limit per address" in k)
        if per_address < STREAMS // 2:
            fail("only %d streams refused by the per-address budget" % per_address)
        if not admitted or admitted[0] < FIRST_MESSAGE_TIMEOUT_S - 0.5 or \
                admitted[-1] > FIRST_MESSAGE_TIMEOUT_S + 2:
            fail("the admitted silent streams did not end at the first-message timeout: %s" %
                 (admitted[:3] + admitted[-3:]))
        log = co.log_text()
        if "no request message within" not in log:
            fail("the log does not name the cancelled silent streams")

        # The job is healthy, as an operator sees it.
        status = co.ddpctl_status()
        ranks = [(r["rank"], r["state"]) for r in status["ranks"]]
        print("ddpctl status: state %s, registered %d, ranks %s, failed_rank %s" %
              (status["state"], status["registered"], ranks, status.get("failed_rank")))
        if status["state"] != "RUNNING" or status["registered"] != 2 or \
                status.get("failed_rank") is not None:
            fail("the job is not healthy after the flood: %s" % json.dumps(status)[:600])
        if len(ranks) != 2 or any(s in ("lost", "failed", "stalled") for _, s in ranks):
            fail("a rank is not healthy: %s" % ranks)
        print("ok: view_flood")
    finally:
        co.stop()


def store_cancel(bin_dir, work):
    budget = 24
    co = go.Coordinator(bin_dir, work, "cancel", 1, "--max-worker-calls", str(budget))
    try:
        dist = co.dist
        worker = Worker(dist, 0)
        worker.register()
        beat = go.unary(worker.ch, "Heartbeat")
        md = go.bearer(dist["token"])

        def heartbeat():
            try:
                beat(go.heartbeat_request(worker.rank, worker.pid, 1), metadata=md, timeout=5)
                return "OK"
            except grpc.RpcError as e:
                return "%s: %s" % (e.code().name, e.details())

        first = heartbeat()
        if first != "OK":
            fail("heartbeat before the waits: %s" % first)
        # Parked StoreGets on keys that never come, 60 s each: half on one connection, to be
        # cancelled call by call, half on another, to be dropped with their connection.
        cancel_ch, drop_ch = go.channel(dist), go.channel(dist)
        futures = []
        for i in range(budget):
            ch = cancel_ch if i % 2 == 0 else drop_ch
            futures.append((i % 2, go.unary(ch, "StoreGet").future(
                go.store_get_request("never/%d" % i, 60000), metadata=md, timeout=120)))
        # Until the budget is full: a probing heartbeat may take a slot first, and the parked
        # call it displaced is then sent again.
        deadline = time.monotonic() + 10
        full = "not probed"
        while "RESOURCE_EXHAUSTED" not in full and time.monotonic() < deadline:
            time.sleep(0.2)
            for n, (kind, f) in enumerate(futures):
                if f.done():
                    ch = cancel_ch if kind == 0 else drop_ch
                    futures[n] = (kind, go.unary(ch, "StoreGet").future(
                        go.store_get_request("never/%d" % n, 60000), metadata=md, timeout=120))
            time.sleep(0.2)
            full = heartbeat()
        print("with %d parked StoreGet calls: heartbeat %s" % (budget, full))
        if "RESOURCE_EXHAUSTED" not in full or "worker calls in flight" not in full:
            ended = [str(f.exception()) for _, f in futures if f.done()]
            fail("the parked calls did not fill the worker budget: heartbeat %s; %d of %d parked "
                 "calls already ended: %s" % (full, len(ended), budget, ended[:2]))

        t0 = time.monotonic()
        for kind, f in futures:
            if kind == 0:
                f.cancel()
        drop_ch.close()
        answered = None
        while time.monotonic() < t0 + 10:
            if heartbeat() == "OK":
                answered = time.monotonic() - t0
                break
            time.sleep(0.05)
        if answered is None:
            fail("no slot came back within 10 s of the calls' cancellation (the calls wait for "
                 "their 60 s timeout): heartbeat %s" % heartbeat())
        print("slots back %.2f s after the clients went away" % answered)
        if answered > 1.5:
            fail("slots came back only after %.2f s" % answered)
        # Every slot, not one: the budget admits `budget` - 1 parked calls again (the server
        # notices a dropped connection a moment after its last byte: retried for a few seconds,
        # far below the calls' 60 s).
        all_back = None
        while all_back is None and time.monotonic() < t0 + 5:
            again = [go.unary(worker.ch, "StoreGet").future(
                go.store_get_request("again/%d" % i, 60000), metadata=md, timeout=120)
                for i in range(budget - 1)]
            time.sleep(0.3)
            refused = [f for f in again if f.done()]
            for f in again:
                f.cancel()
            if not refused:
                all_back = time.monotonic() - t0
            else:
                last_error = refused[0].exception()
                time.sleep(0.2)
        if all_back is None:
            fail("the budget did not admit %d parked calls again within 5 s: %s" %
                 (budget - 1, last_error))
        print("every slot back within %.2f s" % all_back)
        if not co.alive():
            fail("the coordinator died")
        print("ok: store_cancel")
    finally:
        co.stop()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "flood":
        asyncio.run(flood(sys.argv[2], float(sys.argv[3])))
        return
    cases = {"view_flood": view_flood, "store_cancel": store_cancel}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print("usage: role_budget_test.py %s" % "|".join(cases), file=sys.stderr)
        sys.exit(2)
    bin_dir = os.environ.get("DDP_BIN_DIR")
    if not bin_dir:
        print("DDP_BIN_DIR is unset (run through ctest)", file=sys.stderr)
        sys.exit(2)
    work = tempfile.mkdtemp(prefix="ddp-budget.")
    try:
        cases[sys.argv[1]](bin_dir, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
