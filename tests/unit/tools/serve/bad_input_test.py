"""Every bad input gets an answer, never a crash, and the server answers the
next request: malformed JSON, wrong types, out-of-range values, prompts
longer than the context and n above the limit (400, naming the field), a
full queue (429 with Retry-After), a body over the limit (413), and slow or
half-open clients (dropped after the timeout)."""

from __future__ import annotations

import socket
import threading
import time
import unittest

import serve_harness
from serve_harness import Server

CONTEXT = 2048  # stories260K's


def long_prompt_ids(length, first=1):
    return [first] + [(i * 7) % 500 + 3 for i in range(length - 1)]


class ServingTestCase(unittest.TestCase):
    server: Server

    def assert_serves(self):
        status, _, body = self.server.post_json("/v1/completions",
                                                {"prompt": "Tom", "max_tokens": 3})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["completion_tokens"], 3)
        self.assertTrue(self.server.alive())

    def assert_error(self, path, payload, status, param=None, text=None):
        got, headers, body = self.server.post_json(path, payload)
        self.assertEqual(got, status, body)
        error = body["error"]
        self.assertEqual(error["param"], param, body)
        self.assertEqual(error["code"], status)
        if text is not None:
            self.assertIn(text, error["message"])
        self.assert_serves()
        return headers


class RequestErrorsTest(ServingTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max_n", "8")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_malformed_json(self):
        for body in (b"{", b"{\"prompt\": \"x\",}", b"not json", b"\xff\xfe", b""):
            self.assert_error("/v1/completions", body, 400, text="not valid JSON")
        self.assert_error("/v1/chat/completions", b"[1, 2]", 400, text="must be a JSON object")

    def test_wrong_types(self):
        self.assert_error("/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens")
        self.assert_error("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400,
                          "temperature")
        self.assert_error("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream")
        self.assert_error("/v1/completions", {"prompt": {"text": "x"}}, 400, "prompt")
        self.assert_error("/v1/chat/completions", {"messages": "hello"}, 400, "messages")
        self.assert_error("/v1/chat/completions", {"messages": [{"role": "user", "content": 3}]},
                          400, "messages[0].content")

    def test_out_of_range_values(self):
        for field, value in (("temperature", -0.5), ("top_p", 1.5), ("top_k", -7), ("min_p", 2),
                             ("presence_penalty", 9), ("max_tokens", 0), ("logprobs", 99),
                             ("repetition_penalty", 0)):
            self.assert_error("/v1/completions", {"prompt": "x", field: value}, 400, field)
        self.assert_error("/v1/completions", {"prompt": [1, 100000]}, 400, "prompt",
                          "outside the vocabulary")
        self.assert_error("/v1/completions", {"prompt": "x", "stop_token_ids": [600]}, 400,
                          "stop_token_ids")

    def test_prompt_longer_than_the_context(self):
        self.assert_error("/v1/completions", {"prompt": long_prompt_ids(CONTEXT + 10)}, 400,
                          "prompt", "maximum context length is 2048")
        self.assert_error("/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "and the dog ran " * 700}]},
                          400, "messages", "maximum context length")
        self.assert_error("/v1/completions",
                          {"prompt": long_prompt_ids(2000), "max_tokens": 100}, 400, "max_tokens")

    def test_n_above_the_limit(self):
        self.assert_error("/v1/completions", {"prompt": "x", "n": 9}, 400, "n", "1 to 8")
        self.assert_error("/v1/completions",
                          {"prompt": "x", "use_beam_search": True, "best_of": 9}, 400, "best_of")

    def test_unknown_route_and_model(self):
        status, body = self.server.get("/v1/completion")
        self.assertEqual(status, 404)
        self.assertIn(b"no route", body)
        self.assert_error("/v1/completions", {"model": "llama", "prompt": "x"}, 404, "model")

    def test_unknown_fields_are_ignored(self):
        status, _, body = self.server.post_json(
            "/v1/completions", {"prompt": "x", "max_tokens": 2, "frobnicate": {"a": [1]}})
        self.assertEqual(status, 200, body)


class LimitsTest(ServingTestCase):
    @classmethod
    def setUpClass(cls):
        # One waiting request fills the queue, and one token a step makes a
        # long prompt wait (prefilling) long enough to be seen.
        cls.server = Server("--max_queued", "1", "--max_batch_tokens", "1",
                            "--max_request_bytes", "65536", "--http_timeout_s", "1")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_a_full_queue_is_429_with_retry_after(self):
        first = {}

        def send_first():
            first["reply"] = self.server.post_json(
                "/v1/completions", {"prompt": long_prompt_ids(2000, first=2), "max_tokens": 2})

        sender = threading.Thread(target=send_first)
        sender.start()
        waiting = self.server.wait_for_metric("kvjit_num_requests_waiting", lambda v: v == 1)
        self.assertEqual(waiting, 1)
        status, headers, body = self.server.post_json("/v1/completions",
                                                      {"prompt": "x", "max_tokens": 2})
        sender.join()
        self.assertEqual(status, 429, body)
        self.assertEqual(headers.get("Retry-After"), "1")
        self.assertEqual(body["error"]["type"], "rate_limit_error")
        self.assertEqual(first["reply"][0], 200, first["reply"][2])
        self.assertGreaterEqual(self.server.metrics()["kvjit_requests_rejected_total"], 1)
        self.assert_serves()

    def test_a_body_over_the_limit_is_413(self):
        status, _, body = self.server.post_json(
            "/v1/completions", {"prompt": "the dog " * 10000, "max_tokens": 2})
        self.assertEqual(status, 413)
        self.assertEqual(body["error"]["code"], 413)
        self.assertIn("larger than this server's limit of 65536 bytes", body["error"]["message"])
        self.assert_serves()
        # curl -d's default type, which cpp-httplib caps at 8 KiB, is named.
        status, _, body = self.server.post_json(
            "/v1/completions", b"{\"prompt\": \"" + b"dog " * 3000 + b"\"}",
            headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 413)
        self.assertIn("Content-Type: application/json", body["error"]["message"])
        self.assert_serves()

    def assert_dropped_within(self, connection, seconds):
        start = time.monotonic()
        connection.settimeout(seconds + 5)
        try:
            while connection.recv(4096):
                pass  # an error response may come before the close
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - start, seconds + 4)
        connection.close()

    def test_slow_and_half_open_clients_time_out(self):
        address = (self.server.host, self.server.port)
        # Connects and sends nothing.
        idle = socket.create_connection(address)
        # Sends half the headers, then nothing.
        slow = socket.create_connection(address)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Le")
        # Sends the headers and part of the body it announced, then nothing.
        half = socket.create_connection(address)
        half.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n"
                     b"\r\n{\"prompt\": ")
        for connection in (idle, slow, half):
            self.assert_dropped_within(connection, 1)
        self.assert_serves()


if __name__ == "__main__":
    serve_harness.main(needs_openai=False)
