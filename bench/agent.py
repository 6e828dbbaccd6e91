"""The gateway's bench agent: runs a suite's client (runner.py) next to a
cluster's scheduler, in the cluster's own Python.

The gateway ships this file through the scheduler preload's "load" op
(images/scripts/bench_preload.py), which checks every request's signature
and calls setup(scheduler); the ops it returns take the request's JSON
body and return the answer's:

  start {"runner": text, "suite": base64 zip} -> {"session"}
  next  {"session", "wait": seconds} -> {"line"} | {"eof", "code", "stderr"} | {"wait": true}
  send  {"session", "line": text} | {"session", "close": true} -> {}
  kill  {"session"} -> {}

The runner speaks the same JSON lines as when the gateway's host runs it;
here it connects to this scheduler directly, with the scheduler's own TLS
files, so a sample's wall time does not include the gateway's proxy.
"""
import asyncio
import base64
import collections
import concurrent.futures
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile

MAX_SESSIONS = 4
MAX_SUITE_BYTES = 1 << 20
MAX_SUITE_FILES = 200
MAX_LINE = 4 << 20
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$")


def unpack(data, into):
    """Writes a suite's zip (top-level Python files only, as the gateway
    stores suites) into the folder, refusing anything else."""
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        if len(infos) > MAX_SUITE_FILES:
            raise ValueError("the suite has %d files, more than %d" % (len(infos), MAX_SUITE_FILES))
        for info in infos:
            if not NAME.match(info.filename):
                raise ValueError("the suite holds %r, which is not a top-level Python file" % info.filename)
            with z.open(info) as src:
                content = src.read(MAX_SUITE_BYTES - total + 1)
            total += len(content)
            if total > MAX_SUITE_BYTES:
                raise ValueError("the suite is larger than %d bytes unpacked" % MAX_SUITE_BYTES)
            with open(os.path.join(into, info.filename), "wb") as dst:
                dst.write(content)


class Session:
    """One runner process and what it has said."""

    def __init__(self, req, conn_args):
        self.dir = tempfile.mkdtemp(prefix="gateway-bench-")
        try:
            runner = os.path.join(self.dir, "gateway_bench_runner.py")
            with open(runner, "w") as f:
                f.write(req["runner"])
            suite = os.path.join(self.dir, "suite")
            os.mkdir(suite)
            unpack(base64.b64decode(req["suite"]), suite)
            argv = [sys.executable, runner, "--suite", suite] + conn_args(self.dir)
            self.proc = subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.lines = collections.deque()
        self.eof = False
        self.err = bytearray()
        self.cond = threading.Condition()
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self):
        for raw in iter(lambda: self.proc.stdout.readline(MAX_LINE), b""):
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _read_err(self):
        # The end is kept: that is where a traceback says what went wrong.
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            with self.cond:
                self.err += chunk
                del self.err[:-16384]

    def next(self, wait):
        with self.cond:
            self.cond.wait_for(lambda: self.lines or self.eof, timeout=wait)
            if self.lines:
                return {"line": self.lines.popleft()}
            if not self.eof:
                return {"wait": True}
            err = self.err.decode("utf-8", "replace")
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return {"eof": True, "code": code, "stderr": err}

    def send(self, req):
        try:
            if req.get("close"):
                self.proc.stdin.close()
            else:
                self.proc.stdin.write(req["line"].encode() + b"\n")
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return {"error": "the runner has exited"}
        return {}

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def setup(scheduler):
    sessions = {}
    # Its own threads: a long poll holds one for up to 25 s, and the event
    # loop's default executor also resolves the scheduler's host names.
    pool = concurrent.futures.ThreadPoolExecutor(2 * MAX_SESSIONS + 2, thread_name_prefix="gateway-bench")

    def conn_args(into):
        sec = scheduler.security
        args = ["--address", scheduler.address]
        for flag, value in (("--ca", sec.tls_ca_file), ("--cert", sec.tls_scheduler_cert), ("--key", sec.tls_scheduler_key)):
            if value and "-----BEGIN" in value:  # contents, not a file
                path = os.path.join(into, flag[2:] + ".pem")
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                    f.write(value)
                value = path
            if value:
                args += [flag, value]
        return args

    def blocking(fn, *args):
        return asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def session(req):
        s = sessions.get(req.get("session"))
        if s is None:
            raise KeyError("no session %r on this scheduler" % req.get("session"))
        return s

    async def start(body):
        req = json.loads(body)
        live = sum(1 for s in sessions.values() if s.proc.poll() is None)
        if live >= MAX_SESSIONS:
            return {"error": "%d benchmark runners already run next to this scheduler" % live}
        try:
            s = await blocking(Session, req, conn_args)
        except Exception as e:
            return {"error": "%s: %s" % (type(e).__name__, e)}
        sid = uuid.uuid4().hex
        sessions[sid] = s
        return {"session": sid}

    async def next_(body):
        req = json.loads(body)
        try:
            s = session(req)
        except KeyError as e:
            return {"error": str(e)}
        return await blocking(s.next, min(max(float(req.get("wait", 20)), 0), 25))

    async def send(body):
        req = json.loads(body)
        try:
            return await blocking(session(req).send, req)
        except KeyError as e:
            return {"error": str(e)}

    async def kill(body):
        s = sessions.pop(json.loads(body).get("session"), None)
        if s is not None:
            await blocking(s.kill)
        return {}

    async def close(body):
        for sid in list(sessions):
            await blocking(sessions.pop(sid).kill)
        pool.shutdown(wait=False)
        return {}

    return {"start": start, "next": next_, "send": send, "kill": kill, "close": close}
