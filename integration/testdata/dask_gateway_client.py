"""dask_gateway's client, as far as the tests need it, written against its
source (dask/dask-gateway, dask-gateway/dask_gateway: gateway.yaml and
config.py for the configuration and its defaults, auth.py for get_auth,
BasicAuth and JupyterHubAuth, utils.py for format_template, client.py for
Gateway, ClusterReport and GatewaySecurity, comm.py for gateway://), which
is not installable here. What it takes from the configuration, it takes
through the real dask.config (Debian's dask): the files of ~/.config/dask
(or $DASK_CONFIG) and /etc/dask, and the DASK_GATEWAY__* environment
variables, by dask's own rules.

Usage: dask_gateway_client.py ACTION... where ACTION is
  list                 Gateway().list_clusters(): one "listed NAME STATUS" line each
  connect:NAME         Gateway().connect(NAME).get_client(), and a computation
  new                  Gateway().new_cluster(), scale(1), a computation, then its shutdown
Each prints its result as "ok ..." or "error TYPE: MESSAGE".
"""

import asyncio
import base64
import os
import ssl
import sys
import tempfile
from datetime import datetime
from urllib.parse import urlparse

import aiohttp
import dask
import dask.config
from distributed import Client
from distributed.comm import registry
from distributed.comm.tcp import TCPBackend, TLSConnector
from distributed.security import Security

# config.py: the package's defaults, under whatever the files and the
# environment say (gateway.yaml).
dask.config.update_defaults(
    {
        "gateway": {
            "address": None,
            "public-address": None,
            "proxy-address": None,
            "auth": {"type": "basic", "kwargs": {}},
            "http-client": {"proxy": True},
            "cluster": {"options": {}},
        }
    }
)


def format_template(x):  # utils.py
    if isinstance(x, str):
        return x.format(**os.environ)
    return x


class BasicAuth:  # auth.py
    def __init__(self, username=None, password=None):
        self.username = username or os.environ.get("USER", "")
        self.password = password or ""

    def pre_request(self, resp):
        data = b":".join((self.username.encode("latin1"), self.password.encode("latin1")))
        return {"Authorization": "Basic " + base64.b64encode(data).decode()}, None


class JupyterHubAuth:  # auth.py
    def __init__(self, api_token=None):
        if api_token is None:
            api_token = os.environ.get("JUPYTERHUB_API_TOKEN")
            if api_token is None:
                raise ValueError("No JupyterHub API token provided, and JUPYTERHUB_API_TOKEN environment variable not found")
        self.api_token = api_token

    def pre_request(self, resp):
        return {"Authorization": "jupyterhub " + self.api_token}, None


def get_auth():  # auth.py, for auth=None
    auth = dask.config.get("gateway.auth.type", None)
    cls = {"basic": BasicAuth, "jupyterhub": JupyterHubAuth}[auth]
    kwargs = dask.config.get("gateway.auth.kwargs", None) or {}
    return cls(**{k: format_template(v) for k, v in kwargs.items()})


class ClusterReport:  # client.py: its constructor takes these fields and no other
    def __init__(self, name, options, status, scheduler_address, dashboard_link, start_time, stop_time, tls_cert=None, tls_key=None):
        self.name, self.status, self.scheduler_address = name, status, scheduler_address
        self.dashboard_link, self.tls_cert, self.tls_key = dashboard_link, tls_cert, tls_key

    @classmethod
    def from_json(cls, public_address, proxy_address, msg):
        start_time = datetime.fromtimestamp(msg.pop("start_time") / 1000)
        stop_time = msg.pop("stop_time")
        name = msg.pop("name")
        status = msg.pop("status")
        scheduler_address = "%s/%s" % (proxy_address, name) if status == "RUNNING" else None
        route = msg.pop("dashboard_route")
        link = "%s%s" % (public_address, route) if route else None
        return cls(start_time=start_time, stop_time=stop_time, name=name, status=status,
                   scheduler_address=scheduler_address, dashboard_link=link, **msg)


class GatewaySecurity(Security):  # client.py
    def __init__(self, tls_key, tls_cert):
        self.tls_key, self.tls_cert = tls_key, tls_cert

    def get_connection_args(self, role):
        with tempfile.TemporaryDirectory() as d:
            key, cert = os.path.join(d, "dask.pem"), os.path.join(d, "dask.crt")
            with open(key, "w") as f:
                f.write(self.tls_key)
            with open(cert, "w") as f:
                f.write(self.tls_cert)
            ctx = ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH, cafile=cert)
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.check_hostname = False
            ctx.load_cert_chain(cert, key)
        return {"ssl_context": ctx, "require_encryption": True}


class GatewayConnector(TLSConnector):  # comm.py: gateway://HOST:PORT/NAME, SNI daskgateway-NAME
    async def connect(self, address, deserialize=True, **connection_args):
        netloc, name = address.split("/", 1)
        connection_args["server_hostname"] = "daskgateway-" + name
        return await super().connect(netloc, deserialize=deserialize, **connection_args)


class GatewayBackend(TCPBackend):
    def get_connector(self):
        return GatewayConnector()


registry.backends["gateway"] = GatewayBackend()


class Gateway:  # client.py, with no arguments
    def __init__(self):
        address = format_template(dask.config.get("gateway.address"))
        if address is None:
            raise ValueError("No dask-gateway address provided or found in configuration")
        self.address = address.rstrip("/")
        public = format_template(dask.config.get("gateway.public-address"))
        self.public_address = self.address if public is None else public.rstrip("/")
        proxy = format_template(dask.config.get("gateway.proxy-address"))
        if proxy is None:
            parsed = urlparse(self.address)
            port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme, 8786)
            netloc = "%s:%d" % (parsed.hostname, port)
        elif isinstance(proxy, int):
            netloc = "%s:%d" % (urlparse(self.address).hostname, proxy)
        else:
            parsed = urlparse(proxy)
            netloc = parsed.netloc if parsed.netloc else proxy
        self.proxy_address = "gateway://%s" % netloc
        self.auth = get_auth()
        self.session = None

    async def request(self, method, url, json=None):  # client.py's _request
        if self.session is None:
            self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        resp = await self.session.request(method, url, json=json)
        if resp.status == 401:
            headers, _ = self.auth.pre_request(resp)
            resp = await self.session.request(method, url, json=json, headers=headers)
        if resp.status >= 400:
            try:
                msg = (await resp.json())["error"]
            except Exception:
                msg = await resp.text()
            if resp.status in (404, 422):
                raise ValueError(msg)
            resp.raise_for_status()
        return resp

    async def list_clusters(self):
        resp = await self.request("GET", "%s/api/v1/clusters/" % self.address)
        return [ClusterReport.from_json(self.public_address, self.proxy_address, r) for r in (await resp.json()).values()]

    async def connect(self, name):  # GatewayCluster.from_name: wait until it runs
        while True:
            resp = await self.request("GET", "%s/api/v1/clusters/%s?wait" % (self.address, name))
            report = ClusterReport.from_json(self.public_address, self.proxy_address, await resp.json())
            if report.status == "RUNNING":
                return report
            if report.status in ("FAILED", "STOPPED", "STOPPING"):
                raise RuntimeError("cluster %s is %s" % (name, report.status))

    async def new_cluster(self):
        resp = await self.request("POST", "%s/api/v1/clusters/" % self.address, json={"cluster_options": {}})
        return await self.connect((await resp.json())["name"])

    async def scale(self, name, n):  # GatewayCluster.scale
        await self.request("POST", "%s/api/v1/clusters/%s/scale" % (self.address, name), json={"count": n})

    async def shutdown(self, name):
        await self.request("DELETE", "%s/api/v1/clusters/%s" % (self.address, name))


async def compute(report):  # GatewayCluster.get_client
    security = GatewaySecurity(tls_key=report.tls_key, tls_cert=report.tls_cert)
    async with Client(report.scheduler_address, security=security, asynchronous=True) as client:
        return await asyncio.wait_for(client.submit(sum, range(10)), 120)


async def main(actions):
    gateway = Gateway()
    print("address", gateway.address, gateway.proxy_address, type(gateway.auth).__name__, flush=True)
    try:
        for action in actions:
            try:
                if action == "list":
                    for r in await gateway.list_clusters():
                        print("listed", r.name, r.status, flush=True)
                    print("ok list", flush=True)
                elif action.startswith("connect:"):
                    report = await gateway.connect(action.split(":", 1)[1])
                    print("ok connect", report.name, "computed", await compute(report), flush=True)
                elif action == "new":
                    report = await gateway.new_cluster()
                    await gateway.scale(report.name, 1)
                    print("ok new", report.name, "computed", await compute(report), flush=True)
                    await gateway.shutdown(report.name)
            except Exception as e:
                print("error %s: %s" % (type(e).__name__, e), flush=True)
    finally:
        if gateway.session is not None:
            await gateway.session.close()


asyncio.run(main(sys.argv[1:]))
