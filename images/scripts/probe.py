# Prints a JSON description of the Python environment it runs in: the
# interpreter, the platform, every installed distribution (with whether it is
# an editable install and where its source is), conda's packages when inside a
# conda environment, and signs of a GPU stack. Standard library only, Python
# 3.8 or later: it runs on clients and inside images alike.
import json, os, platform, sys

try:
    import importlib.metadata as md
except ImportError:  # Python < 3.8
    md = None


def dist_info(d):
    name = d.metadata["Name"] or ""
    out = {"name": name, "version": d.version or "", "editable": False, "location": ""}
    try:
        raw = d.read_text("direct_url.json")
    except Exception:
        raw = None
    if raw:
        try:
            du = json.loads(raw)
        except ValueError:
            du = {}
        url = du.get("url", "")
        if (du.get("dir_info") or {}).get("editable") and url.startswith("file://"):
            out["editable"] = True
            out["location"] = url[len("file://"):]
    try:
        top = d.read_text("top_level.txt")
    except Exception:
        top = None
    if top:
        out["top_level"] = [t.strip() for t in top.splitlines() if t.strip()]
    return out


SUBDIRS = ("noarch", "linux-64", "linux-aarch64", "linux-ppc64le", "linux-s390x", "linux-32", "linux-armv6l",
           "linux-armv7l", "osx-64", "osx-arm64", "win-64", "win-32", "win-arm64", "emscripten-wasm32", "wasi-wasm32")


def conda_channel(ch):
    """The channel as clients write it: conda.anaconda.org/<name> and
    repo.anaconda.com/<path> become <name> and <path>; other URLs stay URLs.
    Credentials (user:password@, /t/<token>/) and the subdir are dropped."""
    ch = (ch or "").strip().rstrip("/")
    if "://" not in ch:
        return ch
    scheme, rest = ch.split("://", 1)
    host, _, path = rest.partition("/")
    host = host.rsplit("@", 1)[-1]
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "t":
        parts = parts[2:]
    if parts and parts[-1] in SUBDIRS:
        parts = parts[:-1]
    if host in ("conda.anaconda.org", "repo.anaconda.com") and parts:
        return "/".join(parts)
    return scheme + "://" + "/".join([host] + parts)


def conda_env():
    # conda's records of the environment this interpreter runs in: its
    # prefix's conda-meta (an activated environment that is not this
    # interpreter's is not what runs).
    prefix = sys.prefix
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return None
    pkgs, channels = [], []
    for f in sorted(os.listdir(meta)):
        if not f.endswith(".json"):
            continue
        try:
            with open(os.path.join(meta, f)) as fh:
                j = json.load(fh)
        except (OSError, ValueError):
            continue
        if not isinstance(j, dict):
            continue
        ch = conda_channel(j.get("channel") or "")
        subdir = j.get("subdir") or ""
        if not subdir:
            raw = (j.get("channel") or "").rstrip("/").rsplit("/", 1)[-1]
            subdir = raw if raw in SUBDIRS else ""
        pkgs.append({"name": j.get("name", ""), "version": j.get("version", ""), "build": j.get("build", ""),
                     "channel": ch, "subdir": subdir})
        if ch and ch not in channels:
            channels.append(ch)
    return {"prefix": prefix, "packages": pkgs, "channels": channels}


def main():
    dists = []
    if md is not None:
        seen = set()
        for d in md.distributions():
            info = dist_info(d)
            key = info["name"].lower()
            if not key or key in seen:  # the first on sys.path wins, as for imports
                continue
            seen.add(key)
            dists.append(info)
    machine = platform.machine().lower()
    gpu_names = ("cupy", "cudf", "rapids", "nvidia-", "cuda-python", "dask-cuda")
    gpu = [d["name"] for d in dists if d["name"].lower().startswith(gpu_names)]
    json.dump({
        "python": "%d.%d.%d" % sys.version_info[:3],
        "implementation": platform.python_implementation().lower(),
        "executable": sys.executable,
        "platform": "linux/" + machine if sys.platform.startswith("linux") else sys.platform + "/" + machine,
        "packages": dists,
        "conda": conda_env(),
        "gpu_packages": gpu,
    }, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


main()
