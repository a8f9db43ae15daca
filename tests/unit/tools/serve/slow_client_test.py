"""Slow clients cannot starve `kvjit serve`: with 1,000 connections from one
address held open, half idle and half sending a request a byte every 200 ms,
a normal request is answered in under a second; a request whose headers or
body outlast --header_timeout_s or --body_timeout_s is answered 408 and
closed; and past --max_connections_per_address an address's next connection
gets 429, while another address is still served."""

from __future__ import annotations

import json
import resource
import select
import socket
import threading
import time
import unittest
from typing import List, Optional

import serve_harness
from serve_harness import Server

SLOW_CLIENTS = 1000
BYTE_INTERVAL_S = 0.2
# A slowloris request: it never gets further than its headers.
SLOW_REQUEST = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 64\r\n" + b"X-Pad: a\r\n" * 200)
COMPLETION = json.dumps({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}).encode()


def raise_open_file_limit(needed: int) -> None:
    """Lets this process (and the servers it starts, which inherit it) hold `needed` sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(f"the test holds {needed} sockets, the hard open-file limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect((server.host, server.port))
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed (or reset) the connection; reads what it sent first."""
    try:
        while select.select([sock], [], [], 0)[0]:
            if not sock.recv(65536):
                return True
    except OSError:
        return True
    return False


def read_until_closed(sock: socket.socket, timeout_s: float) -> bytes:
    """What the server sends before it closes the connection, or raises at `timeout_s`."""
    sock.settimeout(timeout_s)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def parse_response(data: bytes):
    """(status, headers by lowercase name, body) of one HTTP/1.1 response."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def timed_completion(server: Server, source: str) -> float:
    """Seconds a /v1/completions request from `source` takes, connect to last byte."""
    import http.client
    start = time.monotonic()
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30,
                                            source_address=(source, 0))
    try:
        connection.request("POST", "/v1/completions", body=COMPLETION,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    elapsed = time.monotonic() - start
    if response.status != 200:
        raise AssertionError(f"{response.status}: {body!r}")
    return elapsed


class ByteByByteSenders:
    """Connections that each send SLOW_REQUEST a byte every BYTE_INTERVAL_S, from one thread."""

    def __init__(self, sockets: List[socket.socket], start: int = 0):
        self.sockets = sockets
        self.sent = start
        self.failed = set()
        self._stop = threading.Event()
        for sock in sockets:
            sock.setblocking(False)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < len(SLOW_REQUEST):
            byte = SLOW_REQUEST[self.sent:self.sent + 1]
            for i, sock in enumerate(self.sockets):
                if i in self.failed:
                    continue
                try:
                    sock.send(byte)
                except OSError:
                    self.failed.add(i)
            self.sent += 1
            self._stop.wait(BYTE_INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def process_status(pid: int, *fields: str) -> str:
    with open(f"/proc/{pid}/status") as status:
        return ", ".join(line.split(":")[0] + " " + " ".join(line.split()[1:])
                         for line in status if line.split(":")[0] in fields)


class ManySlowClientsTest(unittest.TestCase):
    def test_normal_request_is_answered_within_a_second_among_1000_slow_clients(self):
        raise_open_file_limit(SLOW_CLIENTS + 256)
        server = Server("--max_connections_per_address", str(SLOW_CLIENTS + 100))
        held: List[socket.socket] = []
        senders: Optional[ByteByByteSenders] = None
        try:
            alone = timed_completion(server, "127.0.0.2")
            idle = [connect(server) for _ in range(SLOW_CLIENTS // 2)]
            held += idle
            slow = [connect(server) for _ in range(SLOW_CLIENTS - len(idle))]
            held += slow
            senders = ByteByByteSenders(slow)
            time.sleep(1)  # the server has accepted them all and each has sent a few bytes
            among = [timed_completion(server, source) for source in ("127.0.0.2", "127.0.0.1")]
            print(f"\n/v1/completions alone: {alone:.3f} s; among {SLOW_CLIENTS} slow clients "
                  f"(from 127.0.0.2, 127.0.0.1): {among[0]:.3f} s, {among[1]:.3f} s; server: "
                  f"{process_status(server.process.pid, 'VmRSS', 'Threads')}", flush=True)
            # They were held, not refused or dropped, while the requests were answered.
            dropped = sum(closed_by_server(sock) for sock in idle) + len(senders.failed)
            self.assertEqual(dropped, 0, "slow clients were dropped before their timeouts")
            for elapsed in among:
                self.assertLess(elapsed, 1.0)
        finally:
            if senders:
                senders.stop()
            for sock in held:
                sock.close()
            server.close()


class RequestTimeoutTest(unittest.TestCase):
    HEADER_TIMEOUT_S = 2
    BODY_TIMEOUT_S = 2
    SLACK_S = 1.5

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--header_timeout_s", str(cls.HEADER_TIMEOUT_S),
                            "--body_timeout_s", str(cls.BODY_TIMEOUT_S))

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def assert_timed_out(self, sock: socket.socket, started: float, timeout_s: float, what: str):
        data = read_until_closed(sock, timeout_s + self.SLACK_S)
        elapsed = time.monotonic() - started
        status, headers, body = parse_response(data)
        self.assertEqual(status, 408, data)
        self.assertEqual(headers.get("connection"), "close")
        error = json.loads(body)["error"]
        self.assertIn(what, error["message"])
        self.assertEqual(error["code"], 408)
        self.assertGreaterEqual(elapsed, timeout_s - 0.1)
        self.assertLess(elapsed, timeout_s + self.SLACK_S)

    def slowloris(self, whole_first_line: bool) -> None:
        sock = connect(self.server)
        senders = None
        try:
            started = time.monotonic()
            start = SLOW_REQUEST.index(b"\r\n") + 2 if whole_first_line else 0
            sock.sendall(SLOW_REQUEST[:start])
            senders = ByteByByteSenders([sock], start)
            time.sleep(0.05)
            sock.setblocking(True)
            self.assert_timed_out(sock, started, self.HEADER_TIMEOUT_S, "headers")
        finally:
            if senders:
                senders.stop()
            sock.close()

    def test_slowloris_in_the_request_line_is_answered_408_at_the_header_timeout(self):
        self.slowloris(whole_first_line=False)

    def test_slowloris_in_the_headers_is_answered_408_at_the_header_timeout(self):
        self.slowloris(whole_first_line=True)

    def test_slow_body_is_answered_408_and_closed_at_the_body_timeout(self):
        sock = connect(self.server)
        try:
            body = COMPLETION + b" " * 100
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nContent-Length: " + str(len(body)).encode() +
                         b"\r\n\r\n" + body[:10])
            started = time.monotonic()
            sender = threading.Thread(target=self._send_slowly, args=(sock, body[10:]),
                                      daemon=True)
            sender.start()
            self.assert_timed_out(sock, started, self.BODY_TIMEOUT_S, "body")
        finally:
            sock.close()

    @staticmethod
    def _send_slowly(sock: socket.socket, data: bytes) -> None:
        try:
            for i in range(len(data)):
                sock.send(data[i:i + 1])
                time.sleep(BYTE_INTERVAL_S)
        except OSError:
            pass

    def test_kept_alive_connection_idle_past_the_header_timeout_is_still_served(self):
        # The header deadline starts at a request's first byte, not when the
        # server begins to wait for it: an idle kept-alive connection lasts 5 s.
        sock = connect(self.server)
        try:
            sock.settimeout(5)
            for _ in range(2):
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                data = b""
                while not data.endswith(b'{"status":"ok"}'):
                    chunk = sock.recv(4096)
                    self.assertTrue(chunk, f"the server closed the connection: {data!r}")
                    data += chunk
                time.sleep(self.HEADER_TIMEOUT_S + 0.5)
        finally:
            sock.close()


class PerAddressLimitTest(unittest.TestCase):
    LIMIT = 8

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max_connections_per_address", str(cls.LIMIT))

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def admitted(self, source: str) -> socket.socket:
        """A connection from `source` the server has admitted: it answered a request on it."""
        sock = connect(self.server, source)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        data = b""
        while not data.endswith(b'{"status":"ok"}'):
            chunk = sock.recv(4096)
            self.assertTrue(chunk, f"{source}'s connection was closed: {data!r}")
            data += chunk
        self.assertEqual(parse_response(data)[0], 200, data)
        return sock

    def refused(self, source: str):
        """The error object of a connection from `source` the server refuses with 429."""
        sock = connect(self.server, source)
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, body = parse_response(read_until_closed(sock, 5))
        finally:
            sock.close()
        self.assertEqual(status, 429)
        self.assertEqual(headers.get("connection"), "close")
        self.assertEqual(headers.get("content-type"), "application/json")
        return json.loads(body)["error"]

    def test_each_address_is_served_up_to_its_limit_and_refused_past_it(self):
        held: List[socket.socket] = []
        try:
            for source in ("127.0.0.1", "127.0.0.2"):
                # Exactly at the limit is served: the LIMIT-th connection too.
                held += [self.admitted(source) for _ in range(self.LIMIT)]
                error = self.refused(source)
                self.assertEqual(error["code"], 429)
                self.assertEqual(error["type"], "rate_limit_error")
                self.assertIn(source, error["message"])
                self.assertIn(f"{self.LIMIT} connections", error["message"])
            # A closed connection frees its place.
            held.pop(0).close()
            time.sleep(0.2)
            held.append(self.admitted("127.0.0.1"))
            self.assertEqual(self.refused("127.0.0.1")["code"], 429)
            # Another address is still served: 127.0.0.3 has none open.
            held.append(self.admitted("127.0.0.3"))
        finally:
            for sock in held:
                sock.close()
        self.assertTrue(self.server.alive())


if __name__ == "__main__":
    serve_harness.main(needs_openai=False)
