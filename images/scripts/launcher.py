# Starts a Dask scheduler or worker ("python -c <this> scheduler|worker
# ARGS...") after checking that this machine runs the software the client
# runs. GATEWAY_ENV_EXPECT holds the client's versions as JSON ({"python":
# "3.12", "dask": "2024.8.0", ...}; "" for a package the client does not
# have). The versions found are always printed, so that every member's log
# says what it ran; a difference prints a table and exits with status 97
# before Dask starts, and the gateway fails the cluster with that table.
import json, os, sys

try:
    import importlib.metadata as md
except ImportError:
    md = None

ALIASES = {"msgpack": ["msgpack-python"], "cupy": ["cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"],
           "cudf": ["cudf-cu13", "cudf-cu12", "cudf-cu11"]}
# The order of images.CheckedPackages, in which versions are printed.
ORDER = ["python", "dask", "distributed", "cloudpickle", "msgpack", "numpy", "pandas", "cupy", "cudf"]


def norm(n):
    out, sep = [], False
    for ch in n.strip().lower():
        if ch in "-_.":
            sep = True
            continue
        if sep and out:
            out.append("-")
        sep = False
        out.append(ch)
    return "".join(out)


def installed():
    found = {}
    if md is None:
        return found
    for d in md.distributions():
        n = norm(d.metadata["Name"] or "")
        if n and n not in found:
            found[n] = (d.version or "").strip()
    return found


def main():
    role = sys.argv[1] if len(sys.argv) > 1 else "member"
    want = json.loads(os.environ.get("GATEWAY_ENV_EXPECT") or "{}")
    have = installed()
    keys = [k for k in ORDER if k in want] + sorted(k for k in want if k not in ORDER)
    # Without expectations, the versions are printed for the log only; the
    # GPU packages only when present.
    shown = keys or [k for k in ORDER if k not in ("cupy", "cudf") or any(have.get(a) for a in [k] + ALIASES[k])]
    here = {}
    for key in shown:
        if key == "python":
            here[key] = "%d.%d" % sys.version_info[:2]
            continue
        v = have.get(norm(key), "")
        for alias in ALIASES.get(norm(key), []):
            v = v or have.get(alias, "")
        here[key] = v
    print("gateway-env: " + " ".join("%s=%s" % (k, here[k] or "(missing)") for k in shown), flush=True)
    diff = [k for k in keys if (want[k] or "") != here[k]]
    if diff:
        rows = [("package", "client", "image")] + [(k, want[k] or "(missing)", here[k] or "(missing)") for k in diff]
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        print("gateway: environment mismatch: this %s does not run the client's software" % role, flush=True)
        for r in rows:
            print("%s  %s  %s" % (r[0].ljust(w0), r[1].ljust(w1), r[2]), flush=True)
        sys.exit(97)
    argv = [sys.executable, "-m", "dask"] + sys.argv[1:]
    # The gateway's member preload (images.BenchPreload), which
    # images.LauncherScript defines before this script, as a file: every
    # Dask version takes a preload's path. A worker takes it too, and its
    # nanny when it has one: it closes their HTTP servers.
    if role in ("scheduler", "worker") and globals().get("BENCH_PRELOAD"):
        import tempfile
        fd, path = tempfile.mkstemp(prefix="gateway_preload_", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(BENCH_PRELOAD)
        argv += ["--preload", path]
        if role == "worker" and "--no-nanny" not in argv:
            argv += ["--preload-nanny", path]
    os.execv(sys.executable, argv)


main()
