"""Writes distributed_sampler_golden.txt: what torch's DistributedSampler yields for every case of
sampler_plan_test's GoldenCases(), reduced to a digest per case, so that the bit-exactness test
runs without a Python torch too. Regenerate after changing GoldenCases():

    python tests/common/testdata/make_sampler_golden.py > tests/common/testdata/distributed_sampler_golden.txt
"""
import torch
from torch.utils.data.distributed import DistributedSampler


def golden_cases():
    """The same list, in the same order, as GoldenCases() in sampler_plan_test.cc."""
    cases = []
    for n in (1, 2, 3, 7, 10, 17, 64, 100, 1000, 4097):
        for world in (1, 2, 3, 4, 8, 16):
            for drop_last in (False, True):
                for epoch in (0, 1, 5):
                    rank_step = world // 3 if world > 4 else 1
                    for rank in range(0, world, rank_step):
                        cases.append((n, world, rank, epoch, drop_last, True, 1234 if epoch == 5 else 0))
    cases.append((10, 3, 1, 0, False, False, 0))
    cases.append((10, 3, 2, 0, True, False, 0))
    cases.append((300000, 4, 3, 2, False, True, 42))
    return cases


def digest(indices):
    """count, position-weighted checksum sum(v * (i + 1)) mod 2^64, first and last value."""
    checksum = sum(v * (i + 1) for i, v in enumerate(indices)) % (1 << 64)
    first = indices[0] if indices else -1
    last = indices[-1] if indices else -1
    return f"{len(indices)} {checksum} {first} {last}"


print(f"# torch {torch.__version__} DistributedSampler(range(n), num_replicas=world, rank=rank, "
      "shuffle, seed, drop_last), set_epoch(epoch)")
print("# n world rank epoch drop_last shuffle seed : count checksum first last")
for n, w, r, e, d, s, seed in golden_cases():
    smp = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=s, seed=seed, drop_last=d)
    smp.set_epoch(e)
    print(f"{n} {w} {r} {e} {int(d)} {int(s)} {seed} : {digest(list(smp))}")
