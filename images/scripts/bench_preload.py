import asyncio, base64, collections, hashlib, hmac, json, logging, os, random, re, socket, ssl, threading, time
# The gateway's member preload (a file given to --preload, and to workers'
# --preload and --preload-nanny). On a scheduler it serves two endpoints
# under the dashboard, and makes the dashboard answer the gateway alone;
# a worker or nanny serves no HTTP at all (see wrap_http_server).
# The dashboard's TLS requires a client certificate signed by the
# cluster's CA (its own self-signed certificate: the dashboard's ca-file,
# or its certificate when none is set), which only the gateway and the
# cluster's owner hold. Dask's own dashboard TLS asks for none (it leaves
# verify_mode at CERT_NONE, even with a ca-file), so anyone who reached
# the port read the dashboard, the JSON and these endpoints. The module is
# imported before the scheduler starts its HTTP server (Scheduler.__init__
# processes preloads first), so start_http_server is wrapped here: the
# context is changed before the loop accepts any connection. A dashboard
# without TLS is not served at all.
# .../gateway-health/watch streams this scheduler's counts to the gateway
# (see scheduler/watch.go): a JSON line at once and whenever they change,
# an empty line every ?beat= seconds otherwise. The gateway holds one such
# request per running cluster instead of asking every few seconds, so an
# idle cluster costs it a heartbeat every few minutes, not a request. A
# watch asking ?stall=S is ended (its socket shut down, from a thread) when
# the event loop has not run for S seconds: a blocked scheduler says so
# without the gateway needing frequent heartbeats to notice.
# .../gateway-bench/<op>, whose requests must be signed: X-Gateway-Bench:
# t=<unix seconds>,n=<nonce, 32 hex digits>,s=<HMAC-SHA256 hex of
# "<op>\n<t>\n<n>\n" + body>, keyed with the SHA-256 of the cluster's TLS
# private key (bench/agent.go). The header is checked before the body is
# read: a malformed one, a time more than WINDOW seconds from this clock,
# a nonce already seen or a body over MAX_BODY is refused at once, and the
# connection is closed without reading the body. A nonce is remembered
# until its time leaves the window, so a captured request cannot be
# replayed. "load" runs the signed body as the bench agent
# (bench/agent.py; a new one replaces the old, the same one is kept),
# which then answers the other ops: the gateway ships its agent when a
# scheduled benchmark runs, so that the suite's client runs here, in the
# cluster's own software.
# Only the gateway and the cluster's owner hold the key, and with it they
# can run code on this scheduler through Dask already.

ST = {}
WATCHERS = [0]
# The watchdog's view: fd -> stall of each open watch, when the loop last ran.
WD = {"socks": {}, "tick": time.monotonic(), "lock": threading.Lock(), "on": False}


# The bench agent's limits: the clock window of a signature (seconds, each
# way), the largest body, and how many nonces are remembered at most.
WINDOW, MAX_BODY, MAX_NONCES = 60, 8 << 20, 10000
SEEN = collections.OrderedDict()  # nonce -> when it leaves the window
SIG = re.compile(r"t=([0-9]{1,12}),n=([0-9a-f]{32}),s=([0-9a-f]{64})")


def remember(nonce, t):
    # A nonce is kept until its time leaves the window (after which its
    # request is refused as stale anyway); when the set is full of live
    # ones, new requests wait rather than old nonces being forgotten.
    now = time.time()
    while SEEN and next(iter(SEEN.values())) < now:
        SEEN.popitem(last=False)
    if len(SEEN) >= MAX_NONCES:
        for k in [k for k, exp in SEEN.items() if exp < now]:
            del SEEN[k]
        if len(SEEN) >= MAX_NONCES:
            return False
    SEEN[nonce] = t + WINDOW + 1
    return True


def guard_dashboard(node):
    log = logging.getLogger("distributed.gateway")
    srv = getattr(node, "http_server", None)
    if srv is None:
        return False
    srv.gateway_guarded = True
    ctx = getattr(srv, "ssl_options", None)
    if not isinstance(ctx, ssl.SSLContext):
        log.error("gateway: the dashboard has no TLS (distributed.scheduler.dashboard.tls.cert): not serving it")
        srv.stop()
        return False
    import dask
    ca = dask.config.get("distributed.scheduler.dashboard.tls.ca-file", None) or \
        dask.config.get("distributed.scheduler.dashboard.tls.cert", None)
    try:
        ctx.load_verify_locations(cafile=ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    except Exception as e:
        log.error("gateway: the dashboard cannot require the cluster's certificate (%s): not serving it", e)
        srv.stop()
        return False
    return True


def write_worker_port(node):
    path = os.environ["GATEWAY_WORKER_DASHBOARD_FILE"]
    try:
        port = node.http_server.port
    except Exception:
        port = 0
    if not port:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


def wrap_http_server():
    try:
        from distributed.node import ServerNode
    except Exception as e:
        logging.getLogger("distributed.gateway").warning("gateway: dashboard guard not installed: %s", e)
        return
    start = ServerNode.start_http_server

    def start_http_server(self, *args, **kwargs):
        prefix = os.environ.get("GATEWAY_WORKER_DASHBOARD_PREFIX")
        if prefix and type(self).__name__ == "Worker" and args:
            # dask worker takes --dashboard-prefix but drops it (2022.12
            # and later): the worker's pages are served under the
            # gateway's path for them here instead.
            try:
                import dask
                from distributed.http.utils import get_handlers
                self._http_prefix = prefix
                args = (get_handlers(server=self, modules=dask.config.get("distributed.worker.http.routes"),
                                     prefix=prefix),) + tuple(args[1:])
            except Exception as e:
                logging.getLogger("distributed.gateway").warning("gateway: worker pages without prefix: %s", e)
        out = start(self, *args, **kwargs)
        if type(self).__name__ == "Scheduler":
            guard_dashboard(self)
        elif type(self).__name__ == "Worker" and os.environ.get("GATEWAY_WORKER_DASHBOARD_FILE"):
            # A backend that routes worker pages through the gateway: the
            # worker's server is guarded as the scheduler's (TLS, the
            # cluster's client certificate required) and its port written
            # where the backend reads it (Dask tells the gateway nothing).
            if guard_dashboard(self):
                write_worker_port(self)
        else:
            # A worker's or nanny's HTTP server (/metrics, /health, its
            # sitemap) answers whoever reaches it, in plain HTTP, and the
            # gateway reads nothing from it. Dask starts it whatever its
            # options say, and the node needs the server's port after:
            # it is closed again in this same call, before the event loop
            # can accept a connection on it.
            self.http_server.stop()
        return out

    ServerNode.start_http_server = start_http_server


wrap_http_server()


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
    if type(scheduler).__name__ != "Scheduler":
        return  # a worker or nanny: start_http_server closed its HTTP server
    if not getattr(getattr(scheduler, "http_server", None), "gateway_guarded", True):
        # The wrapper did not run (a Dask that starts its HTTP server
        # elsewhere): late, but before the gateway is told of the cluster.
        log.warning("gateway: guarding the dashboard late")
        guard_dashboard(scheduler)
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

        @web.stream_request_body
        class H(web.RequestHandler):
            def check_xsrf_cookie(self):
                pass

            def refuse(self, code, msg):
                self.set_status(code)
                self.set_header("Connection", "close")
                self.finish({"error": msg})

            def prepare(self):
                # Everything that can be judged without the body is, before
                # a byte of it is read: finishing here closes the
                # connection instead of reading the body.
                self.sig, self.chunks, self.size = None, [], 0
                m = SIG.fullmatch(self.request.headers.get("X-Gateway-Bench", ""))
                if m is None:
                    return self.refuse(403, "bad signature: X-Gateway-Bench must be t=<unix time>,n=<32 hex digits>,s=<64 hex digits>")
                t, n = int(m.group(1)), m.group(2)
                if abs(time.time() - t) > WINDOW:
                    return self.refuse(403, "stale signature: its time is %d s from this scheduler's clock (allowed: %d s); check the clocks" % (int(time.time() - t), WINDOW))
                if n in SEEN:
                    return self.refuse(403, "replayed request: this nonce was used already")
                length = self.request.headers.get("Content-Length")
                if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
                    return self.refuse(413, "body over %d bytes" % MAX_BODY)
                self.request.connection.set_max_body_size(MAX_BODY)
                self.sig = m

            def data_received(self, chunk):
                if self.sig is None:
                    return
                self.size += len(chunk)
                if self.size > MAX_BODY:  # a chunked body: not kept beyond the limit
                    self.sig, self.chunks = None, []
                    return self.refuse(413, "body over %d bytes" % MAX_BODY)
                self.chunks.append(chunk)

            async def post(self, op):
                if self.sig is None:
                    return
                t, n, got = self.sig.groups()
                body = b"".join(self.chunks)
                self.chunks = []
                want = hmac.new(key, ("%s\n%s\n%s\n" % (op, t, n)).encode() + body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(got, want):
                    return self.refuse(403, "bad signature")
                # Checked and recorded with no await between: of two
                # copies of one request, one runs.
                if n in SEEN:
                    return self.refuse(403, "replayed request: this nonce was used already")
                if not remember(n, int(t)):
                    return self.refuse(429, "over %d signed requests in %d s: try again later" % (MAX_NONCES, 2 * WINDOW))
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
