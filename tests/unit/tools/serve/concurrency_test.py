"""64 streaming clients at once against `kvjit serve`: each one's greedy text
equals what `kvjit run` prints for its prompt alone, however the scheduler
batched, chunked and preempted them; and a client that disconnects mid-stream
cancels its request, whose KV blocks go back to the pool (seen on /metrics)."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import threading
import unittest

import serve_harness
from serve_harness import Server

NAMES = ["Lily", "Tom", "Sue", "Ben", "Max", "Mia", "Sam", "Zoe"]
PLACES = ["park", "forest", "sea", "garden", "school", "farm", "town", "river"]
CLIENTS = 64
MAX_TOKENS = 160


def prompts():
    """64 prompts of different lengths; every eighth runs past one 64-token step."""
    result = []
    for i in range(CLIENTS):
        text = f"{NAMES[i % 8]} went to the {PLACES[i // 8]}"
        if i % 8 == 7:
            text += " and saw a big dog." * 12
        result.append(text)
    return result


class ConcurrencyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A small pool (51 blocks of 16 tokens, where one request may take
        # 11) and step make the batch chunk prompts and preempt.
        cls.server = Server("--max_batch_tokens", "64", "--kv_pool_mib", "1")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_64_concurrent_streams_equal_their_solo_runs(self):
        import openai
        texts = prompts()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            solo = list(pool.map(lambda p: serve_harness.solo_run(p, MAX_TOKENS), texts))
        client = openai.OpenAI(base_url=self.server.url + "/v1", api_key="none", max_retries=0,
                               timeout=120)

        # All 64 ask at once, so that the batch holds many of them.
        start = threading.Barrier(CLIENTS)

        def stream(prompt):
            start.wait()
            chunks = client.completions.create(model="stories260K", prompt=prompt,
                                               max_tokens=MAX_TOKENS, temperature=0, stream=True)
            return "".join(chunk.choices[0].text for chunk in chunks)

        try:
            with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
                streamed = list(pool.map(stream, texts))
        finally:
            client.close()
        for i, (got, expected) in enumerate(zip(streamed, solo)):
            self.assertEqual(got, expected, f"client {i}: {texts[i]!r}")
        metrics = self.server.metrics()
        self.assertGreaterEqual(metrics["kvjit_requests_finished_total"], CLIENTS)
        self.assertGreater(metrics["kvjit_num_preemptions_total"], 0,
                           "the pool was meant to be too small for all 64 at once")
        self.assertEqual(self.server.wait_for_metric("kvjit_kv_blocks_used", lambda v: v == 0), 0)



class DisconnectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_a_disconnect_mid_stream_frees_its_blocks(self):
        before = self.server.metrics()
        body = json.dumps({"prompt": "Once upon a time in a land far away", "max_tokens": 1900,
                           "n": 4, "temperature": 1.0, "ignore_eos": True, "stream": True})
        connection = socket.create_connection((self.server.host, self.server.port), timeout=30)
        connection.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: test\r\n"
                            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                            f"\r\n{body}").encode())
        received = connection.recv(65536)
        self.assertTrue(received.startswith(b"HTTP/1.1 200 OK"), received)
        while received.count(b"data: ") < 8:
            received += connection.recv(65536)
        in_use = self.server.metrics()["kvjit_kv_blocks_used"]
        self.assertGreater(in_use, 0)
        connection.close()

        cancelled = self.server.wait_for_metric(
            "kvjit_requests_cancelled_total",
            lambda v: v == before["kvjit_requests_cancelled_total"] + 1)
        self.assertEqual(cancelled, before["kvjit_requests_cancelled_total"] + 1)
        self.assertEqual(self.server.wait_for_metric("kvjit_kv_blocks_used", lambda v: v == 0), 0)
        after = self.server.metrics()
        # It was cut short: far fewer than its 4 x 1900 tokens were computed.
        self.assertLess(after["kvjit_computed_tokens_total"] - before["kvjit_computed_tokens_total"],
                        4 * 1900)
        # The server goes on serving.
        status, _, response = self.server.post_json("/v1/completions",
                                                    {"prompt": "Tom", "max_tokens": 4})
        self.assertEqual(status, 200)
        self.assertEqual(response["usage"]["completion_tokens"], 4)


if __name__ == "__main__":
    serve_harness.main()
