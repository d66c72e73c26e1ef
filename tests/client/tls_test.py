"""Clients talk only to their own coordinator: TLS pinned to the job's certificate, with the real
binaries and sockets (Python for the outsiders).

usage: tls_test.py CASE   (DDP_BIN_DIR: ddp-coordinator, ddpctl, ddp-loadgen)

squatter_raw   the coordinator is SIGKILLed and a Python process binds its port: ddpctl
               (status, stop) and simulated workers (ddp-loadgen, the worker token) that still
               follow the dist_file reach the squatter, which receives TLS handshakes it cannot
               complete (first byte 0x16) and no byte of any token.
squatter_tls   the same, but the squatter answers TLS with a certificate of its own for the very
               name clients check: every client aborts the handshake; no request reaches it.
plaintext      a plaintext gRPC client with the right token gets no answer from the coordinator
               (UNAVAILABLE), and the coordinator serves its TLS clients as before.
restart        a coordinator restarted from its journal (--resume-from-journal) republishes the
               same certificate; ddpctl follows the dist_file, and a token file written before the
               restart (token + certificate) works against the new address.

Exit 0 when the case holds, 1 otherwise (one line on stderr), 77 when grpcio is missing.
"""

import base64
import os
import signal
import socket
import ssl
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

TLS_NAME = "slurm-ddp-coordinator"
BIN = os.environ.get("DDP_BIN_DIR", "build/bin")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_dist_file(path, min_incarnation=0, deadline_s=20):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("end=1\n"):
                d = dict(l.split("=", 1) for l in text.splitlines()[1:] if "=" in l)
                if int(d.get("incarnation", "0")) >= min_incarnation:
                    return d
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    fail("no dist_file (incarnation >= %d) at %s after %d s" % (min_incarnation, path, deadline_s))


def tokens(dist):
    return [dist["token"], dist["view_token"], dist["control_token"]]


class Job:
    def __init__(self, work):
        self.work = work
        self.dist_file = os.path.join(work, "dist_file")
        self.procs = []

    def start_coordinator(self, resume=False):
        argv = [os.path.join(BIN, "ddp-coordinator"), "--world-size", "2", "--job-id", "tls",
                "--dist-file", self.dist_file, "--listen", "127.0.0.1:0", "--http-port", "-1",
                "--heartbeat-timeout", "60", "--log-file", os.path.join(self.work, "coord.log")]
        if resume:
            argv.append("--resume-from-journal")
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def ddpctl(self, *args, timeout_s=3):
        argv = [os.path.join(BIN, "ddpctl"), "--timeout", str(timeout_s)] + list(args)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
        subprocess.run(["rm", "-rf", self.work])


class Squatter:
    """Binds a port (the dead coordinator's) and records what every connection sends. With
    `tls_identity` (cert, key files) it answers TLS with it and records what it decrypts."""

    def __init__(self, port, tls_identity=None):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        end = time.time() + 10
        while True:
            try:
                self.sock.bind(("127.0.0.1", port))
                break
            except OSError:
                if time.time() > end:
                    fail("cannot bind the dead coordinator's port %d" % port)
                time.sleep(0.1)
        self.sock.listen(64)
        self.ctx = None
        if tls_identity:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(*tls_identity)
            self.ctx.set_alpn_protocols(["h2"])
        self.lock = threading.Lock()
        self.connections = []  # bytes received per connection (decrypted with TLS)
        self.handshakes = 0  # TLS handshakes completed
        self.handshake_errors = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        index = None
        with self.lock:
            self.connections.append(b"")
            index = len(self.connections) - 1
        conn.settimeout(10)
        try:
            if self.ctx:
                try:
                    conn = self.ctx.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError) as e:
                    with self.lock:
                        self.handshake_errors.append(str(e))
                    return
                with self.lock:
                    self.handshakes += 1
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                with self.lock:
                    self.connections[index] += data
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()

    def close(self):
        self.sock.close()


def record_types(data):
    """The content types of the TLS records in `data`; None if it is not TLS records."""
    types, i = [], 0
    while i < len(data):
        if len(data) - i < 5 or data[i] not in (20, 21, 22, 23) or data[i + 1] != 3:
            return None
        types.append(data[i])
        i += 5 + int.from_bytes(data[i + 3:i + 5], "big")
    return types


def make_foreign_identity(work):
    cert, key = os.path.join(work, "squatter.pem"), os.path.join(work, "squatter.key")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                        "/CN=" + TLS_NAME, "-addext", "subjectAltName=DNS:" + TLS_NAME,
                        "-keyout", key, "-out", cert], capture_output=True, text=True)
    if r.returncode != 0:
        fail("openssl req: " + r.stderr.strip())
    return cert, key


def squatter_case(job, with_tls):
    coord = job.start_coordinator()
    dist = read_dist_file(job.dist_file)
    port = int(dist["grpc_address"].rsplit(":", 1)[1])
    # The job's clients are connected (a status works), then the coordinator dies.
    r = job.ddpctl("--dist-file", job.dist_file, "status")
    if r.returncode != 0:
        fail("status before the squatter: " + r.stderr.strip())
    coord.send_signal(signal.SIGKILL)
    coord.wait()
    squatter = Squatter(port, make_foreign_identity(job.work) if with_tls else None)
    # Workers (the worker token) and operators (view, control) still follow the dist_file.
    workers = subprocess.Popen([os.path.join(BIN, "ddp-loadgen"), "--dist-file", job.dist_file,
                                "--workers", "2", "--duration", "4"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    job.procs.append(workers)
    status = job.ddpctl("--dist-file", job.dist_file, "status")
    stop = job.ddpctl("--dist-file", job.dist_file, "stop")
    try:
        workers.wait(timeout=30)
    except subprocess.TimeoutExpired:
        workers.kill()
        workers.wait()
    time.sleep(0.5)
    squatter.close()
    for name, r in (("status", status), ("stop", stop)):
        if r.returncode == 0:
            fail("ddpctl %s succeeded against the squatter: %s" % (name, r.stdout.strip()))
    if workers.returncode == 0:
        fail("the simulated workers succeeded against the squatter")
    with squatter.lock:
        received = list(squatter.connections)
        handshakes, errors = squatter.handshakes, list(squatter.handshake_errors)
    if not received:
        fail("no client reached the squatter (nothing was tested)")
    everything = b"".join(received)
    for t in tokens(dist):
        if t.encode() in everything or base64.b64encode(t.encode()) in everything:
            fail("the squatter received a token")
    if with_tls:
        if handshakes != 0 or everything:
            fail("a client completed a handshake with the squatter's certificate (%d, %d bytes)"
                 % (handshakes, len(everything)))
        if not errors:
            fail("no failed handshake recorded")
        print("squatter with its own certificate: %d connections, 0 handshakes completed, "
              "0 bytes of requests (first error: %s)" % (len(received), errors[0]))
    else:
        # Every connection carries TLS handshake records (content type 22) and nothing else: no
        # application data (23), which is where a call and its token would travel. (A plaintext
        # client sends "PRI * HTTP/2.0" and then its headers, the token HPACK-encoded.)
        for c in received:
            types = record_types(c)
            if types is None or any(t != 0x16 for t in types):
                fail("a client sent something other than TLS handshake records: %r" % c[:16])
        print("raw squatter: %d connections, %d bytes, only TLS handshake records, no token"
              % (len(received), len(everything)))
    print("ddpctl status: " + status.stderr.strip())


def plaintext_case(job):
    job.start_coordinator()
    dist = read_dist_file(job.dist_file)
    ch = grpc.insecure_channel(dist["grpc_address"])
    hello = ch.unary_unary("/slurm_ddp.v1.Coordinator/Hello", request_serializer=None,
                           response_deserializer=None)
    try:
        hello(b"", timeout=3, metadata=[("authorization", "Bearer " + dist["view_token"])])
        fail("a plaintext client was answered")
    except grpc.RpcError as e:
        if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            fail("plaintext client: %s (want UNAVAILABLE)" % e.code())
        print("plaintext client refused: %s" % e.code())
    # The same call over the job's TLS works.
    creds = grpc.ssl_channel_credentials(root_certificates=base64.b64decode(dist["tls_cert"]))
    tls = grpc.secure_channel(dist["grpc_address"], creds,
                              options=[("grpc.ssl_target_name_override", TLS_NAME)])
    tls.unary_unary("/slurm_ddp.v1.Coordinator/Hello", request_serializer=None,
                    response_deserializer=None)(
        b"", timeout=10, metadata=[("authorization", "Bearer " + dist["view_token"])])
    r = job.ddpctl("--dist-file", job.dist_file, "status")
    if r.returncode != 0:
        fail("status after the plaintext client: " + r.stderr.strip())


def restart_case(job):
    coord = job.start_coordinator()
    before = read_dist_file(job.dist_file)
    token_file = os.path.join(job.work, "view.tok")
    cert = job.ddpctl("--dist-file", job.dist_file, "dist-file", "--field", "tls_cert")
    if cert.returncode != 0 or "BEGIN CERTIFICATE" not in cert.stdout:
        fail("dist-file --field tls_cert: " + cert.stderr.strip())
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(before["view_token"] + "\n" + cert.stdout)
    r = job.ddpctl("--address", before["grpc_address"], "--token-file", token_file, "status")
    if r.returncode != 0:
        fail("token file before the restart: " + r.stderr.strip())
    coord.send_signal(signal.SIGKILL)
    coord.wait()
    job.start_coordinator(resume=True)
    after = read_dist_file(job.dist_file, min_incarnation=1)
    if after["tls_cert"] != before["tls_cert"]:
        fail("the restarted coordinator published another certificate")
    if after["grpc_address"] == before["grpc_address"]:
        fail("the restarted coordinator kept the address (nothing was tested)")
    r = job.ddpctl("--dist-file", job.dist_file, "status")
    if r.returncode != 0:
        fail("status after the restart: " + r.stderr.strip())
    r = job.ddpctl("--address", after["grpc_address"], "--token-file", token_file, "status")
    if r.returncode != 0:
        fail("token file after the restart: " + r.stderr.strip())
    print("restart: same certificate, incarnation %s on %s; dist_file and token file work"
          % (after.get("incarnation"), after["grpc_address"]))


def main():
    cases = {"squatter_raw": lambda j: squatter_case(j, False),
             "squatter_tls": lambda j: squatter_case(j, True),
             "plaintext": plaintext_case, "restart": restart_case}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print("usage: tls_test.py " + "|".join(cases), file=sys.stderr)
        return 2
    job = Job(tempfile.mkdtemp(prefix="tls_test."))
    try:
        cases[sys.argv[1]](job)
    finally:
        job.close()
    print("ok: " + sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
