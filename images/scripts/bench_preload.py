import asyncio, base64, hashlib, hmac, json, logging, os, random, socket, threading, time
# The gateway's scheduler preload (a file given to --preload). It serves
# two endpoints under the dashboard.
# .../gateway-health/watch streams this scheduler's counts to the gateway
# (see scheduler/watch.go): a JSON line at once and whenever they change,
# an empty line every ?beat= seconds otherwise. The gateway holds one such
# request per running cluster instead of asking every few seconds, so an
# idle cluster costs it a heartbeat every few minutes, not a request. A
# watch asking ?stall=S is ended (its socket shut down, from a thread) when
# the event loop has not run for S seconds: a blocked scheduler says so
# without the gateway needing frequent heartbeats to notice.
# .../gateway-bench/<op>, whose requests
# must be signed (X-Gateway-Bench: HMAC-SHA256 of "<op>\n" + body, keyed
# with the SHA-256 of the cluster's TLS private key). "load" runs the
# signed body as the bench agent (bench/agent.py; a new one replaces the
# old, the same one is kept), which then answers the other ops: the
# gateway ships its agent when a scheduled benchmark runs, so that the
# suite's client runs here, in the cluster's own software.
# Only the gateway and the cluster's owner hold the key, and with it they
# can run code on this scheduler through Dask already.

ST = {}
WATCHERS = [0]
# The watchdog's view: fd -> stall of each open watch, when the loop last ran.
WD = {"socks": {}, "tick": time.monotonic(), "lock": threading.Lock(), "on": False}


def watchdog(loop):
    def tick():
        WD["tick"] = time.monotonic()

    while True:
        time.sleep(0.5)
        try:
            loop.call_soon_threadsafe(tick)
        except RuntimeError:
            return  # the loop is closed
        late = time.monotonic() - WD["tick"]
        with WD["lock"]:
            gone = [fd for fd, stall in WD["socks"].items() if late > stall]
            for fd in gone:
                del WD["socks"][fd]
        for fd in gone:
            # A duplicate descriptor shuts the shared socket down without
            # touching the TLS object the blocked loop owns.
            try:
                s = socket.socket(fileno=os.dup(fd))
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


def counts(s):
    # What counts.json says that the gateway reads, without its walk over
    # every task: this runs every second while a watch is open.
    return {
        "workers": len(s.workers),
        "clients": len(s.clients),
        "processing": sum(len(w.processing) for w in s.workers.values()),
        "waiting": sum(g.states.get("waiting", 0) for g in s.task_groups.values()),
        "desired_workers": s.adaptive_target(),
    }


def watch_handler(scheduler, web):
    class W(web.RequestHandler):
        async def get(self):
            # A watch is the gateway's; a few are allowed for a replica
            # taking over while the old one's lingers.
            if WATCHERS[0] >= 8:
                self.set_status(429)
                return self.finish({"error": "too many watches"})
            WATCHERS[0] += 1
            fd = None
            try:
                beat = min(max(float(self.get_argument("beat", "15")), 1.0), 3600.0)
                stall = float(self.get_argument("stall", "0"))
                if stall >= 1:
                    fd = self.request.connection.stream.socket.fileno()
                    with WD["lock"]:
                        WD["socks"][fd] = stall
                        if not WD["on"]:
                            WD["on"] = True
                            loop = asyncio.get_running_loop()
                            threading.Thread(target=watchdog, args=(loop,), daemon=True, name="gateway-watchdog").start()
                self.set_header("Content-Type", "application/x-ndjson")
                self.set_header("Cache-Control", "no-store")
                # The first heartbeat at a random point of the beat, so
                # that the clusters' heartbeats spread over it. The loop
                # ticks on the wall clock's whole seconds: every scheduler
                # whose clock agrees with the others (NTP keeps cloud
                # machines within a millisecond) writes in the same
                # instant, and the gateway reads all of a second's
                # heartbeats in one wake-up rather than one each (a
                # process woken costs it far more than a line read). Due
                # times stay on the monotonic clock, half a tick early so
                # that a beat of whole seconds is not a tick late: a step
                # of the wall clock moves a tick, never a heartbeat.
                last, due = None, time.monotonic() + random.uniform(0, beat)
                while True:
                    c, now = counts(scheduler), time.monotonic()
                    if c != last:
                        self.write(json.dumps(c) + "\n")
                        last, due = c, now + beat - 0.5
                    elif now >= due:
                        self.write("\n")
                        due = now + beat - 0.5
                    else:
                        await asyncio.sleep(1 - time.time() % 1)
                        continue
                    await self.flush()
            except Exception:
                pass  # the gateway went away
            finally:
                WATCHERS[0] -= 1
                if fd is not None:
                    with WD["lock"]:
                        WD["socks"].pop(fd, None)

    return W


def dask_setup(scheduler):
    log = logging.getLogger("distributed.gateway")
    try:
        from tornado import web
        scheduler.http_application.add_handlers(r".*$", [(r".*/gateway-health/watch", watch_handler(scheduler, web))])
    except Exception as e:
        log.warning("gateway health watch unavailable: %s", e)
    try:
        from tornado import web
        # The PEM markers are spelled so that this text, which travels in
        # user data and task definitions, is not taken for key material.
        m, pk = "-" * 5, "PRIVATE" + " KEY"
        k = getattr(scheduler.security, "tls_scheduler_key", None) or ""
        if not k:
            log.info("gateway bench agent off: this scheduler has no TLS key")
            return
        if "\n" not in k:  # a file's path, not its contents
            with open(k) as f:
                k = f.read()
        b, on = [], False
        for ln in k.splitlines():
            ln = ln.strip()
            if ln.startswith(m):
                if on:
                    break
                on = pk in ln
            elif on and ":" not in ln:
                b.append(ln)
        key = hashlib.sha256(base64.b64decode("".join(b))).digest()

        class H(web.RequestHandler):
            def check_xsrf_cookie(self):
                pass

            async def post(self, op):
                body = self.request.body
                want = hmac.new(key, op.encode() + b"\n" + body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(self.request.headers.get("X-Gateway-Bench", ""), want):
                    self.set_status(403)
                    return self.finish({"error": "bad signature"})
                if op == "load":
                    h = hashlib.sha256(body).hexdigest()
                    if ST.get("hash") == h:
                        return self.finish({"loaded": True})
                    ns = {"__name__": "gateway_bench_agent"}
                    exec(compile(body, "gateway_bench_agent", "exec"), ns)
                    close = ST.get("close")
                    ST.clear()
                    if close:
                        await close(b"")
                    ST.update(ns["setup"](scheduler), hash=h)
                    return self.finish({"loaded": True})
                f = ST.get(op) if op != "hash" else None
                if f is None:
                    self.set_status(409)
                    return self.finish({"error": "the agent is not loaded"})
                self.finish(await f(body))

        scheduler.http_application.add_handlers(r".*$", [(r".*/gateway-bench/([a-z]+)", H)])
    except Exception as e:
        log.warning("gateway bench agent unavailable: %s", e)


async def dask_teardown(scheduler):
    if ST.get("close"):
        await ST["close"](b"")
