"""Baseline for bench/loadgen.sh: the same rendezvous through PyTorch's TCPStore.

N client threads (one TCPStore connection each) take a rank with add(), publish an address with
set(), count in, wait until all N joined, then read their shard parameters with get(). Prints
`tcpstore_s=<seconds until every thread holds rank + shard>`.
"""
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

n = int(sys.argv[1])
master = dist.TCPStore("127.0.0.1", 0, n + 1, True, timedelta(seconds=300), wait_for_workers=False)
port = master.port
master.set("shard_params", "dataset_size=1281167 seed=0 shuffle=1")
done = threading.Barrier(n + 1)
errors = []


def worker(i):
    try:
        s = dist.TCPStore("127.0.0.1", port, n + 1, False, timedelta(seconds=300))
        rank = s.add("rank", 1) - 1
        s.set(f"addr/{rank}", f"node{i // 8}:{i % 8}")
        if s.add("joined", 1) == n:
            s.set("go", "1")
        s.wait(["go"])
        s.get("shard_params")
    except Exception as e:  # noqa: BLE001
        errors.append(repr(e))
    done.wait()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
start = time.perf_counter()
for t in threads:
    t.start()
done.wait()
elapsed = time.perf_counter() - start
for t in threads:
    t.join()
print(f"tcpstore_s={elapsed:.4f} errors={len(errors)}")
