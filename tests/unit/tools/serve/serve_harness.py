"""Runs `kvjit serve` for a test: on a free loopback port, stopped with the test.

Each test script takes --kvjit and --model; it exits 77 (ctest's skip code)
with a message when the model is absent or the openai package is missing,
so that it skips in a user's clone and runs wherever both are installed (CI).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import unittest
from typing import Dict, List, Optional, Tuple

SKIP = 77

# Filled in by main() from the command line.
KVJIT: str = ""
MODEL: str = ""


def skip(reason: str) -> None:
    # check_skips.py reads the line before "[  SKIPPED ]" as the reason.
    print(f"{reason}\n[  SKIPPED ] {os.path.basename(sys.argv[0])}", flush=True)
    sys.exit(SKIP)


def main(needs_openai: bool = True) -> None:
    """Parses --kvjit/--model, skips when they cannot run, then runs unittest."""
    global KVJIT, MODEL
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvjit", required=True)
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a model file")
    model.add_argument("--downloaded_model",
                       help="a model tools/scripts/fetch_model.sh fetched: the file's name under "
                            "$KVJIT_MODEL_DIR, else ~/.cache/kvjit/models")
    args, rest = parser.parse_known_args()
    KVJIT = args.kvjit
    if args.model:
        MODEL = args.model
        where = "../shared/models"
    else:
        directory = os.environ.get("KVJIT_MODEL_DIR") or os.path.expanduser("~/.cache/kvjit/models")
        MODEL = os.path.join(directory, args.downloaded_model)
        where = "tools/scripts/fetch_model.sh fetches it"
    if not os.path.isfile(MODEL):
        skip(f"needs the model {MODEL} ({where})")
    if needs_openai:
        try:
            import openai  # noqa: F401
        except ImportError:
            skip(f"needs the openai package for {sys.executable} (scripts/setup.sh installs it)")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


class Server:
    """`kvjit serve MODEL --port 0 FLAGS...` (or `model` in place of MODEL), up once /health
    answers."""

    def __init__(self, *flags: str, start_timeout_s: float = 60, model: Optional[str] = None):
        command = [KVJIT, "serve", model or MODEL, "--port", "0", "--access_log=false", *flags]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.stderr_lines: List[str] = []
        threading.Thread(target=self._keep_stderr, daemon=True).start()
        line = self._read_line(start_timeout_s)
        prefix = "kvjit serve: listening on "
        if not line.startswith(prefix):
            self.close()
            raise RuntimeError(f"kvjit serve did not start: {line!r}; stderr: {self.stderr()}")
        self.url = line[len(prefix):].strip()
        self.host, port = self.url[len("http://"):].rsplit(":", 1)
        self.port = int(port)
        deadline = time.monotonic() + start_timeout_s
        while self.get("/health")[0] != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("kvjit serve never answered /health")
            time.sleep(0.05)

    def _keep_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    def _read_line(self, timeout_s: float) -> str:
        result: List[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        return result[0] if result else ""

    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[Dict[str, str]] = None,
                timeout_s: float = 30) -> Tuple[int, Dict[str, str], bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def get(self, path: str) -> Tuple[int, bytes]:
        try:
            status, _, body = self.request("GET", path, timeout_s=5)
            return status, body
        except OSError:
            return 0, b""

    def post_json(self, path: str, payload, headers: Optional[Dict[str, str]] = None):
        """(status, headers, parsed body) of a POST of `payload` (bytes go as they are)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        status, response_headers, data = self.request("POST", path, body, all_headers)
        return status, response_headers, json.loads(data) if data else None

    def metrics(self) -> Dict[str, float]:
        """The unlabelled samples of /metrics, by name."""
        status, body = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        values = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, value = line.split()
                values[name] = float(value)
        return values

    def wait_for_metric(self, name: str, predicate, timeout_s: float = 20) -> float:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.metrics()[name]
            if predicate(value) or time.monotonic() > deadline:
                return value
            time.sleep(0.01)


def solo_run(prompt: str, max_tokens: int, *flags: str) -> str:
    """What `kvjit run` alone prints for a greedy continuation (its final newline dropped)."""
    output = subprocess.run([KVJIT, "run", MODEL, "-p", prompt, "-n", str(max_tokens),
                             "--temperature", "0", *flags], capture_output=True, text=True,
                            check=True, timeout=60)
    assert output.stdout.endswith("\n"), output.stdout
    return output.stdout[:-1]
