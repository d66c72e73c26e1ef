"""End-to-end tests of node 0's loss (the standby coordinator, trainer/launcher/standby.h): real
ddp-trainer tasks under a faked Slurm step (one task per node, 2 CPU workers each, Gloo on
loopback, spare_e2e_test.SlurmStep). Node 0's whole process group (its task, the coordinator
and its workers) is SIGKILLed or SIGSTOPped for real; node 1's task takes the job over with a
coordinator of the next epoch, from the journal beside the dist_file.

Run as `python standby_e2e_test.py CASE` (CTest registers one test per case). Needs DDP_BIN_DIR
and Python torch; shares recovery_e2e_test.py's flags, reference run and checks.
"""
import glob
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery_e2e_test as R  # noqa: E402
import spare_e2e_test as S  # noqa: E402

# The grace comfortably above the failover timeout (ddp-trainer insists on 5 s between them).
FLAGS = ["--spare-nodes", "1", "--heartbeat-timeout", "5", "--failover-timeout", "2",
         "--coordinator-grace", "30"]


def epoch_log(step, epoch):
    path = f"{step.dist}.coordinator.log.epoch{epoch}"
    return open(path).read() if os.path.exists(path) else ""


def takeover_seconds(log):
    m = re.search(r"coordinator epoch 1 on \S+ \(node 1\) took over ([\d.]+) s after the last "
                  r"answer", log)
    return float(m.group(1)) if m else None


def check_bitwise_end(step, tmp, ref, expected_codes):
    codes, outs = step.finish()
    all_out = step.outputs()
    R.expect(codes == expected_codes, f"task exit codes {codes}, expected {expected_codes}",
             all_out + epoch_log(step, 1))
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    R.expect(not glob.glob(step.dist + ".epoch*[0-9]"), "an epoch claim was left behind",
             str(glob.glob(step.dist + "*")))
    return outs, all_out


def case_node0_killed_spare_takes_over(tmp):
    """2 nodes + 1 spare. Rank 0 is frozen after step 10, then every process of node 0 (task,
    coordinator, workers) is SIGKILLed. Node 1's standby takes over as coordinator epoch 1, the
    spare takes node 0's ranks (rank 0 with them: it writes final.pt) and the run ends bit for
    bit as the uninterrupted one, with no checkpoint read."""
    ref = R.reference()
    step = S.SlurmStep(tmp, "6101", 3, FLAGS, holds=[("step", 0, 10)])
    step.held(0)
    killed_at = time.time()
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    outs, all_out = check_bitwise_end(step, tmp, ref, [-signal.SIGKILL, 0, 0])
    log = epoch_log(step, 1)
    R.expect(re.search(r"node 0 \(host [^,]+, ranks 0,1\) lost with its coordinator", log),
             "the epoch-1 coordinator does not name node 0's loss", log)
    took = takeover_seconds(log)
    R.expect(took is not None, "the epoch-1 coordinator does not log its takeover", log)
    R.expect(re.search(r"standby: coordinator epoch 0 on node 0 silent for .*; taking the job "
                       r"over: started coordinator epoch 1", outs[1]),
             "node 1's task does not log the takeover", outs[1])
    R.expect(re.search(r"taking over node 0 \(host [^,]+, ranks 0,1\): starting its workers as "
                       r"node 0", outs[2]), "the spare did not take node 0 over", outs[2])
    lines = [l for l in outs[2].splitlines() if re.match(r"\[rank 0\] recovery \d+: ", l)]
    print("\n".join(lines + [l for l in outs[1].splitlines() if "standby" in l]))
    print(f"took over {took} s after the last answer; job ended "
          f"{time.time() - killed_at:.1f} s after the kill")


if __name__ == "__main__":
    R.run_case(globals(), "standby")
