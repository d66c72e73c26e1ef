"""gRPC reflection against the real ddp-coordinator, from Python grpcio as an outsider would.

usage: reflection_test.py off|on   (DDP_BIN_DIR: where ddp-coordinator is)

off (the default coordinator): 500 unauthenticated ServerReflectionInfo streams are answered
    UNIMPLEMENTED and the coordinator's thread count (/proc/PID/status) does not grow; the job's
    own calls still work. Reflection used to be on, and each such stream held a thread (500
    streams took the coordinator from 29 to 129 threads).
on  (--grpc-reflection, for debugging): reflection answers (it lists the services), and 500
    open streams hold at most its thread cap (8) plus gRPC's few pollers, not one thread each.

Exit 0 when the case holds, 1 otherwise (one line on stderr), 77 when grpcio is missing.
"""

import base64
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
except ImportError:
    print("SKIP: python3-grpcio is not installed", file=sys.stderr)
    sys.exit(77)

REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
TLS_NAME = "slurm-ddp-coordinator"
STREAMS = 500
# Threads gRPC may add for reasons of its own (pollers, timers, the executor) while 500 streams
# open: the old server added one per stream.
SLACK = 12
REFLECTION_THREADS = 8  # CoordinatorServer::kReflectionThreads


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_dist_file(path, deadline_s=20):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("end=1\n"):
                return dict(l.split("=", 1) for l in text.splitlines()[1:] if "=" in l)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    fail("no dist_file at %s after %d s" % (path, deadline_s))


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    fail("no Threads line for pid %d" % pid)


def open_channel(dist):
    """The job's channel as its clients make it: TLS trusting the dist_file's certificate
    (plaintext only if the coordinator published none, i.e. one built before TLS)."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    if "tls_cert" in dist:
        creds = grpc.ssl_channel_credentials(root_certificates=base64.b64decode(dist["tls_cert"]))
        options.append(("grpc.ssl_target_name_override", TLS_NAME))
        return grpc.secure_channel(dist["grpc_address"], creds, options=options)
    return grpc.insecure_channel(dist["grpc_address"], options=options)


def list_services_request():
    # ServerReflectionRequest: host 1, list_services 7 (string).
    return b"\x3a\x01*"


class HeldStream:
    """One ServerReflectionInfo stream: sends a list_services request, then keeps the request
    side open (the server's handler waits on it), and records how the call ended."""

    def __init__(self, ch):
        self.done = threading.Event()
        self.release = threading.Event()
        self.code = None
        self.first_reply = None
        call = ch.stream_stream(REFLECTION, request_serializer=None, response_deserializer=None)
        self.call = call(self._requests(), timeout=60)
        threading.Thread(target=self._read, daemon=True).start()

    def _requests(self):
        yield list_services_request()
        self.release.wait(60)

    def _read(self):
        try:
            for reply in self.call:
                if self.first_reply is None:
                    self.first_reply = reply
            self.code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.code = e.code()
        self.done.set()


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("off", "on"):
        print("usage: reflection_test.py off|on", file=sys.stderr)
        return 2
    case = sys.argv[1]
    bin_dir = os.environ.get("DDP_BIN_DIR", "build/bin")
    work = tempfile.mkdtemp(prefix="reflection_test.")
    dist_file = os.path.join(work, "dist_file")
    argv = [os.path.join(bin_dir, "ddp-coordinator"), "--world-size", "2", "--job-id", "refl",
            "--dist-file", dist_file, "--listen", "127.0.0.1:0", "--http-port", "-1",
            "--log-file", os.path.join(work, "coordinator.log")]
    if case == "on":
        argv.append("--grpc-reflection")
    coord = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        dist = read_dist_file(dist_file)
        ch = open_channel(dist)
        hello = ch.unary_unary("/slurm_ddp.v1.Coordinator/Hello", request_serializer=None,
                               response_deserializer=None)
        hello(b"", timeout=10, metadata=[("authorization", "Bearer " + dist["view_token"])])
        time.sleep(0.5)  # let the server's start-up threads settle
        before = threads_of(coord.pid)

        streams = []
        for _ in range(STREAMS):
            # A connection per 100 streams (gRPC allows 100 concurrent streams per connection).
            if len(streams) % 100 == 0:
                ch_n = open_channel(dist)
            streams.append(HeldStream(ch_n))
        time.sleep(3)  # every stream has reached the server (or been answered)
        peak = threads_of(coord.pid)
        answered = sum(1 for s in streams if s.done.is_set())
        codes = {}
        for s in streams:
            if s.done.is_set():
                codes[s.code] = codes.get(s.code, 0) + 1
        # The job's own calls are unaffected.
        hello(b"", timeout=10, metadata=[("authorization", "Bearer " + dist["token"])])
        for s in streams:
            s.release.set()
        if coord.poll() is not None:
            fail("the coordinator exited (%s) under the reflection streams" % coord.returncode)

        print("threads before %d, with %d reflection streams open %d; answered %d %s" %
              (before, STREAMS, peak, answered, {str(k): v for k, v in codes.items()}))
        if case == "off":
            if answered != STREAMS or codes.get(grpc.StatusCode.UNIMPLEMENTED) != STREAMS:
                fail("reflection is not off: %d of %d streams answered, codes %s" %
                     (answered, STREAMS, codes))
            if peak > before + SLACK:
                fail("threads grew from %d to %d with %d reflection streams" %
                     (before, peak, STREAMS))
        else:
            replied = [s for s in streams if s.first_reply is not None]
            if not replied or b"slurm_ddp.v1.Coordinator" not in replied[0].first_reply:
                fail("--grpc-reflection: no stream listed the services")
            if peak > before + REFLECTION_THREADS + SLACK:
                fail("--grpc-reflection: threads grew from %d to %d with %d streams (cap %d)" %
                     (before, peak, STREAMS, REFLECTION_THREADS))
        print("ok: reflection %s" % case)
        return 0
    finally:
        coord.send_signal(signal.SIGKILL)
        coord.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
