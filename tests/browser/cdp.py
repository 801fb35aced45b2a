"""A small driver for headless Chromium over the DevTools protocol (websocket-client), enough for
the UI tests: size the viewport, open a URL, evaluate JavaScript, wait for a condition, click, take a screenshot.

Chromium is the Debian package ``chromium`` (scripts/setup.sh installs it). It runs as root, so
with ``--no-sandbox``; with a fresh profile in the test's tmp dir; with everything that would reach
the network on its own turned off.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1440,1000"]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, profile: Path, timeout: float = 30.0):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed: run `bash scripts/setup.sh` (it installs the Debian "
                               "package chromium), or apt-get install -y chromium")
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "DevToolsActivePort").unlink(missing_ok=True)   # a reused profile's is stale
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.timeout = timeout
        try:
            port = self._port(profile / "DevToolsActivePort")
            targets = json.load(_NO_PROXY.open(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        except BaseException:   # never leave a browser running behind a failed start
            self.proc.kill()
            self.proc.wait()
            raise
        self._id = 0
        self.errors: list[str] = []   # uncaught exceptions thrown by the page's scripts
        self.send("Page.enable")
        self.send("Runtime.enable")

    def _port(self, marker: Path) -> int:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} before it listened")
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.exceptionThrown":
                details = msg["params"]["exceptionDetails"]
                self.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def viewport(self, width: int, height: int) -> None:
        """Lay the page out at ``width`` x ``height`` CSS pixels (a window of that size)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def wait(self, expression: str, what: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.eval("document.body ? document.body.innerText.slice(0, 2000) : ''")
                raise AssertionError(f"timed out waiting for {what}; the page shows:\n{text}")
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        found = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                          f"if (!e) return false; e.scrollIntoView({{block: 'center'}}); e.click(); return true; }})()")
        assert found, f"nothing on the page matches {selector}"

    def text(self, selector: str) -> str:
        return self.eval(f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText")

    def screenshot(self, path: Path) -> Path:
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
