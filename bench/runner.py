"""gateway bench runner: lists and runs the benchmarks of a suite.

A suite is a folder of files named bench_*.py. Each function named
bench_<name> taking a distributed.Client is a benchmark. It can be
parametrised like a pytest test:

    import gateway_bench

    @gateway_bench.parametrize("n", [1_000, 10_000])
    def bench_sum(client, n):
        client.submit(sum, range(n)).result()

(pytest.mark.parametrize marks work too when pytest is installed, and so
does a plain attribute: bench_sum.params = {"n": [1_000, 10_000]}.)

The gateway CLI starts this script with the Python of the environment
under test (or, for scheduled runs, the bench agent starts it next to the
scheduler: agent.py) and talks to it in JSON lines:

  --list: one line {"benchmarks": [...], "errors": [...]} and exit.
  otherwise: connect to the cluster, print {"ready": ..., "versions",
  "benchmarks", "errors"} (what --list says), then for each
  line {"id": ...} on stdin run that benchmark once and print one line
  {"id", "ok", "wall_s", "metrics", "error"}. EOF ends it.

The script never decides what to run or how often: the gateway does, so a
benchmark that hangs is handled by killing this process.
"""

import argparse
import importlib.util
import itertools
import json
import os
import sys
import threading
import time
import traceback
import types

PROTOCOL = 1


def _gateway_bench_module():
    """The module suites import for parametrize, made here so that a
    suite needs nothing installed."""
    mod = types.ModuleType("gateway_bench")

    def parametrize(names, values):
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        names = list(names)

        def deco(fn):
            sets = list(getattr(fn, "_gateway_bench_params", []))
            sets.append((names, list(values)))
            fn._gateway_bench_params = sets
            return fn

        return deco

    mod.parametrize = parametrize
    return mod


def _param_sets(fn):
    """Every combination of parameters of fn, as (suffix, kwargs)."""
    axes = []  # each: list of dicts
    for names, values in getattr(fn, "_gateway_bench_params", []):
        axes.append(_axis(names, values))
    params = getattr(fn, "params", None)
    if isinstance(params, dict):
        for name, values in params.items():
            axes.append(_axis([name], values))
    for mark in getattr(fn, "pytestmark", []) or []:
        if getattr(mark, "name", "") == "parametrize" and len(mark.args) >= 2:
            names = mark.args[0]
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            axes.append(_axis(list(names), list(mark.args[1])))
    if not axes:
        return [("", {})]
    out = []
    for combo in itertools.product(*axes):
        kwargs = {}
        for d in combo:
            kwargs.update(d)
        suffix = "[" + ",".join("%s=%s" % (k, _fmt(v)) for k, v in kwargs.items()) + "]"
        out.append((suffix, kwargs))
    return out


def _axis(names, values):
    out = []
    for v in values:
        if len(names) == 1:
            out.append({names[0]: v})
        else:
            out.append(dict(zip(names, v)))
    return out


def _fmt(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return str(v)
    return type(v).__name__


def collect(suite):
    """Imports every bench_*.py of the suite. A file that does not import
    is an error of its own; the others still run."""
    sys.modules.setdefault("gateway_bench", _gateway_bench_module())
    if suite not in sys.path:
        sys.path.insert(0, suite)
    benches, errors = {}, []
    for fname in sorted(os.listdir(suite)):
        if not (fname.startswith("bench_") and fname.endswith(".py")):
            continue
        path = os.path.join(suite, fname)
        modname = fname[:-3]
        try:
            spec = importlib.util.spec_from_file_location(modname, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            spec.loader.exec_module(mod)
        except BaseException as e:  # a suite's SyntaxError, ImportError, SystemExit ...
            sys.modules.pop(modname, None)
            errors.append({"file": fname, "error": _short(e)})
            continue
        _by_value(mod)
        for name in sorted(vars(mod)):
            fn = getattr(mod, name)
            if not (name.startswith("bench_") and callable(fn)):
                continue
            if getattr(fn, "__module__", None) != modname:
                continue  # imported from elsewhere
            try:
                sets = _param_sets(fn)
            except Exception as e:
                errors.append({"file": fname, "error": "%s: bad parameters: %s" % (name, _short(e))})
                continue
            for suffix, kwargs in sets:
                benches["%s::%s%s" % (fname, name, suffix)] = (fn, kwargs)
    return benches, errors


def _by_value(mod):
    # Workers may not have the suite importable (a published image, the
    # local provider): send its functions by value, as Client.upload_file
    # would make them importable.
    try:
        import cloudpickle

        cloudpickle.register_pickle_by_value(mod)
    except Exception:
        pass


def _short(e):
    if isinstance(e, SyntaxError):
        return "SyntaxError: %s (%s, line %s)" % (e.msg, os.path.basename(e.filename or "?"), e.lineno)
    return "%s: %s" % (type(e).__name__, e)


def _tail(tb, n=20):
    lines = tb.rstrip().splitlines()
    return "\n".join(lines[-n:])


# --- metrics, sampled from the scheduler and the workers ---------------------


def _sched_memory(dask_scheduler=None):
    m = dask_scheduler.memory
    return {
        "managed": m.managed_in_memory,
        "unmanaged": m.unmanaged,
        "spilled": m.managed_spilled,
        "workers": len(dask_scheduler.workers),
    }


def _worker_counters(dask_worker=None):
    out = {"cpu_s": 0.0, "sent": 0}
    try:
        import psutil

        t = psutil.Process().cpu_times()
        out["cpu_s"] = t.user + t.system
    except Exception:
        t = os.times()
        out["cpu_s"] = t.user + t.system
    out["sent"] = int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0) or 0)
    return out


class Sampler:
    """Polls the scheduler's memory readings while a benchmark runs."""

    # The scheduler's memory readings change with the workers' heartbeats
    # (every 0.5 s or more): polling faster would only add load.
    def __init__(self, client, interval=0.25):
        self.client, self.interval = client, interval
        self.samples = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            try:
                self.samples.append(self.client.run_on_scheduler(_sched_memory))
            except Exception:
                pass
            self.stop.wait(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)
        try:  # one reading after the end, so that short runs have one
            self.samples.append(self.client.run_on_scheduler(_sched_memory))
        except Exception:
            pass

    def summary(self):
        out = {}
        for key in ("managed", "unmanaged", "spilled"):
            vals = [s[key] for s in self.samples]
            if vals:
                out["peak_%s_bytes" % key] = max(vals)
                out["avg_%s_bytes" % key] = sum(vals) / len(vals)
        if self.samples:
            # The cluster's peak memory is the highest sum of managed and
            # unmanaged memory read together (one reading of the
            # scheduler), not the sum of two peaks taken at different
            # moments. The peak's parts are what the record keeps as its
            # peak managed and unmanaged memory, so that they add up to it.
            top = max(self.samples, key=lambda s: s["managed"] + s["unmanaged"])
            out["peak_memory_bytes"] = top["managed"] + top["unmanaged"]
            out["peak_managed_bytes"] = top["managed"]
            out["peak_unmanaged_bytes"] = top["unmanaged"]
        out["memory_samples"] = len(self.samples)
        return out


def _counters(client):
    try:
        return client.run(_worker_counters)
    except Exception:
        return {}


def _delta(before, after):
    cpu, sent = 0.0, 0
    for w, a in after.items():
        b = before.get(w)
        if b is None:
            continue  # a worker that came or went: its counters restarted
        cpu += max(0.0, a["cpu_s"] - b["cpu_s"])
        sent += max(0, a["sent"] - b["sent"])
    return {"worker_cpu_s": cpu, "bytes_sent_between_workers": sent}


def run_one(client, fn, kwargs):
    before = _counters(client)
    error = None
    with Sampler(client) as s:
        t0 = time.perf_counter()
        try:
            fn(client, **kwargs)
        except BaseException:
            error = _tail(traceback.format_exc())
        wall = time.perf_counter() - t0
    metrics = s.summary()
    metrics.update(_delta(before, _counters(client)))
    return wall, metrics, error


def connect(args):
    from distributed import Client
    from distributed.security import Security

    server_name = args.server_name
    if not server_name:
        # Next to the scheduler (the bench agent): straight to it, with its
        # own TLS files.
        sec = None
        if args.cert:
            sec = Security(tls_ca_file=args.ca or args.cert, tls_client_cert=args.cert, tls_client_key=args.key, require_encryption=True)
        return Client(args.address, security=sec, timeout=60)

    class GatewaySecurity(Security):
        def get_connection_args(self, role):
            a = super().get_connection_args(role)
            a["server_hostname"] = server_name  # the gateway routes by TLS server name
            return a

    sec = GatewaySecurity(
        tls_ca_file=args.cert,
        tls_client_cert=args.cert,
        tls_client_key=args.key,
        require_encryption=True,
    )
    return Client(args.address, security=sec, timeout=60)


def versions():
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    try:
        from importlib import metadata
    except ImportError:
        return out
    for pkg in ("dask", "distributed", "cloudpickle", "msgpack", "numpy", "pandas"):
        try:
            out[pkg] = metadata.version(pkg)
            continue
        except Exception:
            pass
        mod = sys.modules.get(pkg)  # Debian's egg-info: ask the module
        if mod is not None and getattr(mod, "__version__", None):
            out[pkg] = str(mod.__version__)
    return out


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--suite", required=True)
    p.add_argument("--list", action="store_true")
    p.add_argument("--address")
    p.add_argument("--server-name")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--ca")
    args = p.parse_args()
    # The benchmarks' own prints must not break the protocol on stdout.
    out = sys.stdout
    sys.stdout = sys.stderr
    global emit

    def emit(obj):  # noqa: F811
        out.write(json.dumps(obj) + "\n")
        out.flush()

    benches, errors = collect(os.path.abspath(args.suite))
    if args.list:
        emit({"protocol": PROTOCOL, "benchmarks": sorted(benches), "errors": errors, "versions": versions()})
        return 0
    try:
        client = connect(args)
    except Exception as e:
        emit({"ready": False, "error": _short(e)})
        return 1
    emit({"ready": True, "versions": versions(), "benchmarks": sorted(benches), "errors": errors})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        bid = req.get("id")
        if bid not in benches:
            emit({"id": bid, "ok": False, "error": "no benchmark %r in the suite" % bid})
            continue
        fn, kwargs = benches[bid]
        wall, metrics, error = run_one(client, fn, kwargs)
        # A client that lost its scheduler says so: the gateway then looks
        # at the cluster rather than waiting for the next sample to hang.
        connected = getattr(client, "status", "running") == "running"
        emit({"id": bid, "ok": error is None, "wall_s": wall, "metrics": metrics, "error": error or "", "connected": connected})
    try:
        client.close(timeout=10)
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
