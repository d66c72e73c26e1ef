"""Speaks to a real ddp-coordinator the way an outsider would: Python grpcio, no generated stubs.

Messages are encoded by hand (a few protobuf fields each) and sent as raw bytes. Channels use the
job's TLS certificate from the dist_file when it has one (checked under the one name the
certificate carries), else plaintext. Used by the role budget and store cancellation tests.
"""

import base64
import json
import os
import subprocess
import time

import grpc

SERVICE = "/slurm_ddp.v1.Coordinator/"
TLS_NAME = "slurm-ddp-coordinator"


# --- protobuf by hand ------------------------------------------------------------------------

def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value) if value else b""


def field_bytes(number, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(number << 3 | 2) + varint(len(data)) + data


def decode(data):
    """{field number: [values]} of one message (varints as ints, length-delimited as bytes)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            n, i = _read_varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("unknown wire type %d" % wire)
        fields.setdefault(number, []).append(value)
    return fields


def _read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def register_request(host, node_rank, nonce, pid):
    # RegisterRequest: host 1, node_rank 2, local_rank 3, local_world_size 4, pid 5, nonce 6.
    return (field_bytes(1, host) + field_varint(2, node_rank) + field_varint(4, 1) +
            field_varint(5, pid) + field_bytes(6, nonce))


def heartbeat_request(rank, pid, step):
    # HeartbeatRequest: worker 1 (WorkerRef rank 1, pid 2), progress 2 (phase 1, step 4).
    worker = field_varint(1, rank) + field_varint(2, pid)
    progress = field_varint(1, 1) + field_varint(4, step)  # PHASE_TRAINING
    return field_bytes(1, worker) + field_bytes(2, progress)


def store_get_request(key, timeout_ms):
    return field_bytes(1, key) + field_varint(2, timeout_ms)


# --- the job -----------------------------------------------------------------------------------

def read_dist_file(path, deadline_s=20):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with open(path) as f:
                text = f.read()
            if "\nend=1" in text:
                return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError("no dist_file at %s after %d s" % (path, deadline_s))


def channel(dist, own_connection=True, aio=False):
    """A channel to the job's coordinator; own_connection: not shared with other channels."""
    options = [("grpc.use_local_subchannel_pool", 1)] if own_connection else []
    api = grpc.aio if aio else grpc
    cert = dist.get("tls_cert", "")
    if not cert:
        return api.insecure_channel(dist["grpc_address"], options=options)
    options.append(("grpc.ssl_target_name_override", TLS_NAME))
    creds = grpc.ssl_channel_credentials(root_certificates=base64.b64decode(cert))
    return api.secure_channel(dist["grpc_address"], creds, options=options)


def bearer(token):
    return (("authorization", "Bearer " + token),)


def unary(ch, method):
    return ch.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)


class Coordinator:
    """A real ddp-coordinator in a folder of its own; killed by stop()."""

    def __init__(self, bin_dir, work, job_id, world_size, *flags):
        self.dist_file = os.path.join(work, "dist_file." + job_id)
        self.log = os.path.join(work, job_id + ".coordinator.log")
        self.bin_dir = bin_dir
        args = [os.path.join(bin_dir, "ddp-coordinator"), "--world-size", str(world_size),
                "--job-id", job_id, "--dist-file", self.dist_file, "--listen", "127.0.0.1:0",
                "--http-port", "-1", "--log-file", self.log, "--linger", "0.2"] + list(flags)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.dist = read_dist_file(self.dist_file)

    def alive(self):
        return self.proc.poll() is None

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def ddpctl_status(self):
        out = subprocess.run([os.path.join(self.bin_dir, "ddpctl"), "--dist-file", self.dist_file,
                              "status", "--json"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("ddpctl status failed (%d): %s" % (out.returncode, out.stderr))
        return json.loads(out.stdout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

