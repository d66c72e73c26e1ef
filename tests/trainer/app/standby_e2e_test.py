"""End-to-end tests of node 0's loss (the standby coordinator, trainer/launcher/standby.h): real
ddp-trainer tasks under a faked Slurm step (one task per node, 2 CPU workers each, Gloo on
loopback, spare_e2e_test.SlurmStep). Node 0's whole process group (its task, the coordinator
and its workers) is SIGKILLed or SIGSTOPped for real; node 1's task takes the job over with a
coordinator of the next epoch, from the journal beside the dist_file.

Run as `python standby_e2e_test.py CASE` (CTest registers one test per case). Needs DDP_BIN_DIR
and Python torch; shares recovery_e2e_test.py's flags, reference run and checks.
"""
import glob
import json
import os
import re
import signal
import subprocess
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
    # The tasks that ended otherwise than expected last: a failure's report shows its tail.
    wrong = [i for i, (c, e) in enumerate(zip(codes, expected_codes)) if c != e]
    R.expect(codes == expected_codes, f"task exit codes {codes}, expected {expected_codes}",
             "\n".join(f"--- task {i}\n{outs[i]}" for i in range(len(outs)) if i not in wrong) +
             epoch_log(step, 1) + "".join(f"\n--- task {i} (exit {codes[i]})\n{outs[i]}"
                                          for i in wrong))
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


def last_unix(pattern, text, what):
    m = re.search(pattern, text)
    R.expect(m, f"no {what}", text)
    return float(m.group(1))


def case_node0_stopped_is_fenced(tmp):
    """2 nodes + 1 spare. Every process of node 0 is SIGSTOPped (rank 0 frozen after step 10)
    for longer than the failover timeout: node 1 takes over as epoch 1. Rank 2 freezes itself
    before it rejoins, so the recovery waits and the job is still running when node 0 gets
    SIGCONT: the old coordinator finds epoch 1 in the dist_file and exits without serving again,
    node 0's workers are fenced and its task leaves (exit 0). Rank 2 is let go, the spare takes
    node 0's ranks, and the run ends bit for bit; the logs show that the old coordinator accepted
    its last call before the new one accepted its first: at no moment did two coordinators serve
    the job. (Without rank 2's hold the other nodes, which follow the takeover at once, finish
    this short run before node 0 is continued: standby_e2e_node0_stopped_past_the_end.)"""
    ref = R.reference()
    step = S.SlurmStep(tmp, "6102", 3, FLAGS, holds=[("step", 0, 10), ("rejoin", 2, 10)])
    step.held(0)
    os.killpg(step.tasks[0].pid, signal.SIGSTOP)
    deadline = time.time() + 60
    while takeover_seconds(epoch_log(step, 1)) is None and time.time() < deadline:
        time.sleep(0.2)
    R.expect(takeover_seconds(epoch_log(step, 1)) is not None, "no takeover while node 0 stopped",
             epoch_log(step, 1))
    frozen = R.held_pid(R.hold_marker(tmp, step.job_id, 1), lambda: step.tasks[1].poll() is None,
                        60)
    R.expect(frozen, "rank 2 never reached its rejoin", epoch_log(step, 1))
    # ddpctl follows the dist_file to the newest epoch (the stopped one still holds its port).
    st = subprocess.run([R.DDPCTL, "status", "--json", "--dist-file", step.dist],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30,
                        cwd=tmp)
    R.expect(st.returncode == 0, f"ddpctl status exited {st.returncode}", st.stdout)
    coord = json.loads(st.stdout)["coordinator"]
    R.expect(coord["epoch"] == 1 and coord["node"] == 1 and coord["takeovers"] == 1,
             f"ddpctl status shows coordinator {coord}, want epoch 1 on node 1", st.stdout)
    os.killpg(step.tasks[0].pid, signal.SIGCONT)
    deadline = time.time() + 30
    while "fenced: " not in step.coordinator_log() and time.time() < deadline:
        time.sleep(0.05)
    os.kill(frozen, signal.SIGCONT)
    outs, all_out = check_bitwise_end(step, tmp, ref, [0, 0, 0])
    old, new = step.coordinator_log(), epoch_log(step, 1)
    last_old = last_unix(r"fenced: the dist_file names coordinator epoch 1 .* last call accepted "
                         r"at unix time ([\d.]+)", old, "fence line in the old coordinator's log")
    first_new = last_unix(r"accepting calls from unix time ([\d.]+)", new,
                          "serving line in the new coordinator's log")
    R.expect(last_old < first_new, f"the old coordinator accepted a call at {last_old}, after the "
             f"new one began at {first_new}", old + new)
    R.expect(re.search(r"retired this node|leaving", outs[0]),
             "node 0's task did not leave", outs[0])
    print(f"old coordinator's last call {last_old:.3f}, new one's first {first_new:.3f} "
          f"({first_new - last_old:.1f} s apart)")


def case_node0_killed_job_shrinks(tmp):
    """3 nodes, no spare, --min-nodes 2: node 0 (task, coordinator, workers) is SIGKILLed after
    step K of epoch 0. Node 1 takes over as epoch 1 and the job goes on without node 0, world
    6 -> 4, with exactly the steps the re-split implies."""
    k, n, batch, epochs = 3, 512, 16, 3
    step = S.SlurmStep(tmp, "6103", 3, ["--min-nodes", "2", "--heartbeat-timeout", "5",
                                        "--failover-timeout", "2", "--coordinator-grace", "30"],
                       holds=[("step", 0, k)])
    step.held(0)
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    codes, outs = step.finish()
    all_out = step.outputs()
    log = epoch_log(step, 1)
    R.expect(codes == [-signal.SIGKILL, 0, 0], f"task exit codes {codes}", all_out + log)
    R.expect(re.search(r"lost node 0 \(host [^,]+, ranks 0,1\): its task and workers went "
                       r"silent; no spare standing by: the job goes on without it on 2 "
                       r"node\(s\), world 6 -> 4", log), "node 0 was not dropped", log)
    total = S.ceil_div(n, 6) * 6
    per_rank = S.ceil_div(total - k * batch * 6, 4)
    final = R.model_state(os.path.join(tmp, "ck", "final.pt"))
    want_step = k + S.ceil_div(per_rank, batch) + (epochs - 1) * S.ceil_div(n // 4, batch)
    R.expect(final["epoch"] == epochs and final["step"] == want_step,
             f"final.pt at epoch {final['epoch']} step {final['step']}, want {epochs}/{want_step}",
             all_out)
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    print(f"final step {final['step']} after node 0 was dropped at step {k}")


def case_chain_epoch2(tmp):
    """2 nodes + 2 spares. Node 0 is SIGKILLed after step 8: node 1 takes over (epoch 1) and a
    spare takes node 0. Then node 1, which now runs the coordinator, is SIGKILLed after step 16:
    the new node 0 (the spare) is its standby and takes over as epoch 2, the other spare takes
    node 1. The run ends bit for bit."""
    extra = ["--max-restarts", "6"]  # two nodes of two ranks lost: four restarts
    ref = R.reference(extra)
    step = S.SlurmStep(tmp, "6104", 4, FLAGS[:1] + ["2"] + FLAGS[2:] + extra,
                       holds=[("step", 0, 8), ("step", 2, 16)])
    step.held(0)
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    # Task 0 is gone: wait on the hold while node 1's task lives.
    R.expect(R.held_pid(R.hold_marker(tmp, step.job_id, 1), lambda: step.tasks[1].poll() is None,
                        120), "hold 1 never stopped a worker", "")
    os.killpg(step.tasks[1].pid, signal.SIGKILL)
    codes, outs = step.finish()
    all_out = step.outputs()
    log2 = epoch_log(step, 2)
    R.expect(sorted(codes) == [-signal.SIGKILL, -signal.SIGKILL, 0, 0],
             f"task exit codes {codes}", all_out + log2)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    R.expect(re.search(r"coordinator epoch 2 on \S+ \(node 0\) took over", log2),
             "no epoch 2 took over on node 0", log2 + all_out)
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    print(re.search(r"coordinator epoch 2 .*", log2).group(0))


def case_standby_cannot_take_over(tmp):
    """2 nodes + 1 spare; the journal is corrupted in its middle, then node 0 is SIGKILLed. The
    standby's coordinator refuses the journal (a clear line in node 1's task output), is tried
    once more from the journal, and the job ends as it does without a standby instead of
    hanging: rank 0 was on the lost node, so no grace checkpoint can be agreed, and after
    --coordinator-grace and --stop-timeout node 1's workers abort (exit 4). (The spare, which
    gets no answer either, leaves later, after its own unanswered wait: not waited for here.)"""
    step = S.SlurmStep(tmp, "6105", 3, ["--spare-nodes", "1", "--heartbeat-timeout", "5",
                                        "--failover-timeout", "2", "--coordinator-grace", "10",
                                        "--stop-timeout", "5", "--registration-timeout", "15"],
                       holds=[("step", 0, 10)])
    step.held(0)
    journal = step.dist + ".journal"
    with open(journal, "r+b") as f:
        f.seek(os.path.getsize(journal) // 2)
        f.write(b"\xff" * 16)
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    started = time.time()
    try:
        out1 = step.tasks[1].communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        step.kill()
        R.expect(False, "node 1's task still runs 120 s after the kill", step.outputs())
    ended = time.time() - started
    step.kill()
    R.expect(step.tasks[1].returncode == 4, f"node 1's task exited {step.tasks[1].returncode}",
             out1)
    R.expect("journal dist_file.6105.journal: journal record" in out1 and
             "refusing to take over the job" in out1,
             "node 1's task output does not say why the takeover failed", out1)
    R.expect(re.search(r"coordinator \(pid \d+\) exited with code 1 while workers still run; the "
                       r"restarted coordinator ended by itself", out1),
             "the standby's coordinator was not given up on", out1)
    R.expect(re.search(r"\[rank [23]\] aborting: the coordinator was lost", out1),
             "node 1's workers did not end as without a coordinator", out1)
    print([l for l in out1.splitlines() if "refusing to take over" in l][0])
    print(f"node 1's task ended {ended:.1f} s after the kill")

def case_worker_lost_during_takeover(tmp):
    """2 nodes + 1 spare. Node 0 is SIGKILLed (rank 0 frozen after step 10), and at once a worker
    of node 1 (rank 3, frozen after step 10) too, while no coordinator answers: node 1's task
    reports it again until the epoch-1 coordinator answers, respawns it, and the run ends bit for
    bit."""
    ref = R.reference()
    step = S.SlurmStep(tmp, "6106", 3, FLAGS, holds=[("step", 0, 10), ("step", 3, 10)])
    step.held(0)
    victim = step.held(1)
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    time.sleep(0.3)
    os.kill(victim, signal.SIGKILL)
    outs, all_out = check_bitwise_end(step, tmp, ref, [-signal.SIGKILL, 0, 0])
    R.expect(re.search(r"worker \(local rank 1, pid \d+\) killed by signal 9; the coordinator "
                       r"does not answer: reporting it again until it does", outs[1]),
             "node 1's task did not wait for the coordinator", outs[1])
    R.expect(re.search(r"worker rank 3 .* started it again", outs[1]),
             "the lost worker was not started again", outs[1])
    print([l for l in outs[1].splitlines() if "started it again" in l][0])


def case_coordinator_lost_during_recovery(tmp):
    """2 nodes + 1 spare. Rank 2 (node 1) is SIGKILLed after step 8 while rank 3 is frozen before
    it rejoins, so the recovery is under way; then every process of node 0 is SIGKILLed. Node 1
    takes the job over (epoch 1) in the middle of that recovery; rank 3 is let go; the spare takes
    node 0, the respawned rank 2 joins, and the run ends bit for bit."""
    ref = R.reference(["--max-restarts", "4"])
    step = S.SlurmStep(tmp, "6107", 3, FLAGS + ["--max-restarts", "4"],
                       holds=[("step", 2, 8), ("rejoin", 3, 8)])
    victim = step.held(0)
    os.kill(victim, signal.SIGKILL)
    frozen = R.held_pid(R.hold_marker(tmp, step.job_id, 1), lambda: step.tasks[1].poll() is None,
                        120)
    R.expect(frozen, "rank 3 never reached its rejoin", "")
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    deadline = time.time() + 60
    while takeover_seconds(epoch_log(step, 1)) is None and time.time() < deadline:
        time.sleep(0.2)
    os.kill(frozen, signal.SIGCONT)
    outs, all_out = check_bitwise_end(step, tmp, ref, [-signal.SIGKILL, 0, 0])
    R.expect(takeover_seconds(epoch_log(step, 1)) is not None, "no takeover", epoch_log(step, 1))
    print(re.search(r"coordinator epoch 1 .*", epoch_log(step, 1)).group(0))

def case_node0_killed_no_spare_stops(tmp):
    """2 nodes, no spare, no --min-nodes: node 0 (task, coordinator, workers) is SIGKILLed after
    step 10. Node 1 takes the job over, waits for a spare (none comes), and goes on without node
    0 only to write the stop's checkpoint: its task exits 3 (resumable). The requeue (the next
    Slurm generation, both nodes) resumes from that checkpoint and the run ends exit 0, bit for
    bit as the uninterrupted one."""
    step = S.SlurmStep(tmp, "6108", 2, ["--heartbeat-timeout", "5", "--failover-timeout", "2",
                                        "--coordinator-grace", "30"],
                       holds=[("step", 0, 10)])
    step.held(0)
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    codes, outs = step.finish()
    all_out = step.outputs()
    log = epoch_log(step, 1)
    R.expect(codes == [-signal.SIGKILL, 3], f"task exit codes {codes}, want [-9, 3]",
             all_out + log)
    R.expect(re.search(r"lost node 0 \(host [^,]+, ranks 0,1\): .*no spare standing by and no "
                       r"shrinking \(--min-nodes\): the 1 other node\(s\), world 4 -> 2, write the "
                       r"stop's checkpoint", log), "no stop for the lost node 0", log)
    commits = re.findall(r"checkpoint committed by rank 0: epoch (\d+) step (\d+) (\S+)", log)
    R.expect(commits, "the epoch-1 coordinator saw no checkpoint", log)
    stop_step = commits[-1][1]
    requeue = S.SlurmStep(tmp, "6108", 2, ["--heartbeat-timeout", "5"], restart=1)
    codes, outs = requeue.finish()
    all_out = requeue.outputs()
    R.expect(codes == [0, 0], f"requeue exit codes {codes}", all_out)
    R.expect(re.search(r"resuming from \S+ \(run \w+\): epoch \d+, step " + stop_step + ",",
                       all_out),
             f"the requeue did not resume from the stop's checkpoint (step {stop_step})", all_out)
    # The stop came with the recovery, before any step at world 2: the run is the uninterrupted
    # one's, bit for bit.
    R.same_model(os.path.join(tmp, "ck", "final.pt"), R.reference())
    print(f"stopped with a checkpoint at step {stop_step}; the requeue ended bit for bit")

def case_job_suspended_no_takeover(tmp):
    """2 nodes, no spare. The whole job is suspended for 6 s, three times the failover timeout
    (as `scontrol suspend` SIGSTOPs every process of a job), just after rank 0's step 10; node 1
    is resumed first and node 0, with the coordinator, 1.2 s later. The standby did not run
    either, so that time is no silence of the coordinator's: no takeover, and the run ends exit 0
    on both nodes, bit for bit as the uninterrupted one. (Before the fix, the standby's first
    probe after its resumption counted the whole suspension and took the job over at once; the
    Slurm test slurm_trainer_suspend met it now and then.)"""
    ref = R.reference()
    step = S.SlurmStep(tmp, "6109", 2, ["--heartbeat-timeout", "5", "--failover-timeout", "2",
                                        "--coordinator-grace", "30"],
                       holds=[("step", 0, 10)])
    step.held(0)
    for t in step.tasks:
        os.killpg(t.pid, signal.SIGSTOP)
    time.sleep(6)
    os.killpg(step.tasks[1].pid, signal.SIGCONT)
    time.sleep(1.2)
    os.killpg(step.tasks[0].pid, signal.SIGCONT)
    outs, all_out = check_bitwise_end(step, tmp, ref, [0, 0])
    R.expect("taking the job over" not in outs[1] and not epoch_log(step, 1),
             "the standby took the job over after a suspension of the whole job", all_out)
    m = re.search(r"standby: this task was not running for about \S+ \([^)]*\); the "
                  r"coordinator's silence counts from now", outs[1])
    R.expect(m, "node 1's task does not say it was not running", outs[1])
    print(m.group(0))



def stopped_past_the_end(tmp, job_id, node, held_rank):
    """Node `node` of a 2-node job with 1 spare: every process of it is SIGSTOPped (rank
    `held_rank` frozen after step 10) and stays stopped until the job has ended without it:
    the spare took its ranks (and, for node 0, node 1 took the job over as coordinator epoch 1),
    the job SUCCEEDED and its dist_file is gone. Then SIGCONT. Returns the step, every task's
    output, the result file's text and how long the resumed task took to leave."""
    ref = R.reference()
    step = S.SlurmStep(tmp, job_id, 3, FLAGS, holds=[("step", held_rank, 10)])
    step.held(0)
    os.killpg(step.tasks[node].pid, signal.SIGSTOP)
    others = [i for i in range(3) if i != node]
    outs = [""] * 3
    for i in others:
        try:
            outs[i] = step.tasks[i].communicate(timeout=180)[0]
        except subprocess.TimeoutExpired:
            step.kill()
            R.expect(False, f"task {i} still runs 180 s after node {node} was stopped",
                     step.outputs())
    codes = [step.tasks[i].returncode for i in others]
    result_path = step.dist + ".result"
    result = open(result_path).read() if os.path.exists(result_path) else ""
    R.expect(codes == [0, 0] and "state=SUCCEEDED" in result,
             f"without node {node}: task exit codes {codes}, result {result!r}",
             "\n".join(outs) + epoch_log(step, 1))
    R.expect(not os.path.exists(step.dist), "the dist_file outlived the job", "")
    resumed = time.time()
    os.killpg(step.tasks[node].pid, signal.SIGCONT)
    try:
        outs[node] = step.tasks[node].communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        step.kill()
        outs[node] = step.out[node]
        R.expect(False, f"node {node}'s task still runs 120 s after SIGCONT", outs[node])
    left = time.time() - resumed
    step.out = outs
    all_out = step.outputs()
    code = step.tasks[node].returncode
    # The resumed task's output last: a failure's report shows its tail.
    resumed_last = "\n".join(f"--- task {i}\n{outs[i]}" for i in others) + epoch_log(step, 1) + \
        f"\n--- task {node} (resumed)\n{outs[node]}"
    R.expect(code == 0, f"node {node}'s task exited {code} after the job had SUCCEEDED without "
             "it, want 0", resumed_last)
    after = open(result_path).read() if os.path.exists(result_path) else ""
    R.expect(after == result, f"the result file changed after node {node} came back: "
             f"{result!r} -> {after!r}", all_out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    stray = [f for f in glob.glob(step.dist + "*") if not f.endswith((".result", ".log"))
             and ".log." not in f]
    R.expect(not stray, f"files of the job left behind: {stray}", all_out)
    R.expect(not re.search(r"taking the job over: started coordinator epoch \d+ \(pid \d+, "
                           r"unix time", outs[node]),
             f"node {node}'s task took over a job that had ended", outs[node])
    ranks = [l for l in outs[node].splitlines() if "SUCCEEDED without this worker" in l]
    R.expect(len(ranks) == 2, f"node {node}'s workers do not both say the job ended without "
             "them", outs[node])
    print("\n".join(ranks))
    print(f"node {node}'s task left {left:.1f} s after SIGCONT")
    return step, outs, result, left


def case_node0_stopped_past_the_end(tmp):
    """Node 0 (its task, the coordinator, its workers) stopped until the job SUCCEEDED under
    coordinator epoch 1 (stopped_past_the_end). On SIGCONT the old coordinator finds the result
    file that epoch 1 wrote and exits without serving again; before the fix it found no dist_file
    (removed at the end), took that for no newer epoch, and went on serving the ended job to its
    own stale workers. Node 0's workers leave, its task exits 0, the result stays SUCCEEDED."""
    step, outs, result, left = stopped_past_the_end(tmp, "6110", 0, 0)
    old = step.coordinator_log()
    R.expect(re.search(r"fenced: the job ended under coordinator epoch 1 \(SUCCEEDED, "
                       r"dist_file\.6110\.result\); this coordinator \(epoch 0\) stops serving "
                       r"and exits", old), "the old coordinator was not fenced by the job's end",
             old)


def case_node1_stopped_past_the_end(tmp):
    """Node 1 (its task and workers; not the coordinator's) stopped until the spare had taken
    its ranks and the job SUCCEEDED (stopped_past_the_end). On SIGCONT its workers find the job
    ended without them and leave (exit 0), and so does its task: the standby does not take over
    a job that has ended."""
    stopped_past_the_end(tmp, "6111", 1, 2)


if __name__ == "__main__":
    R.run_case(globals(), "standby")
