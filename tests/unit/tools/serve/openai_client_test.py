"""The official openai client against `kvjit serve` on stories260K: chat,
completions, streaming, n, logprobs, stop, seeds, echo, token-id prompts,
beam search, the models list and API keys."""

from __future__ import annotations

import math
import subprocess
import unittest

import serve_harness
from serve_harness import Server

server: Server
client = None
MODEL_NAME = "stories260K"
PROMPT = "Once upon a time"


def setUpModule():
    global server, client
    import openai
    server = Server()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60)


def tearDownModule():
    client.close()
    server.close()


def greedy_completion(prompt=PROMPT, max_tokens=40, **fields):
    return client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=max_tokens,
                                     temperature=0, **fields)


class ChatTest(unittest.TestCase):
    def test_chat_completion(self):
        response = client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "system", "content": "Tell a story."},
                                        {"role": "user", "content": "Once upon a time"}],
            max_tokens=24, temperature=0)
        self.assertEqual(response.object, "chat.completion")
        self.assertTrue(response.id.startswith("chatcmpl-"))
        self.assertEqual(response.model, MODEL_NAME)
        choice = response.choices[0]
        self.assertEqual(choice.message.role, "assistant")
        self.assertTrue(choice.message.content)
        self.assertIn(choice.finish_reason, ("stop", "length"))
        self.assertGreater(response.usage.prompt_tokens, 0)
        self.assertEqual(response.usage.total_tokens,
                         response.usage.prompt_tokens + response.usage.completion_tokens)

    def test_chat_stream_equals_the_whole_response_and_ends_with_usage(self):
        messages = [{"role": "user", "content": "A cat"}]
        whole = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=30,
                                               temperature=0)
        chunks = list(client.chat.completions.create(
            model=MODEL_NAME, messages=messages, max_tokens=30, temperature=0, stream=True,
            stream_options={"include_usage": True}))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, whole.choices[0].message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual(finishes[-1], whole.choices[0].finish_reason)
        self.assertTrue(all(f is None for f in finishes[:-1]))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)
        self.assertTrue(all(c.id == chunks[0].id for c in chunks))
        # The server's timings, under llama.cpp's names, beside the usage.
        for timings, usage in ((chunks[-1].model_extra["timings"], chunks[-1].usage),
                               (whole.model_extra["timings"], whole.usage)):
            self.assertEqual(timings["prompt_n"] + timings["cache_n"], usage.prompt_tokens)
            self.assertEqual(timings["cache_n"], usage.prompt_tokens_details.cached_tokens)
            self.assertEqual(timings["predicted_n"], usage.completion_tokens)
            self.assertGreater(timings["prompt_ms"], 0)
            self.assertGreater(timings["predicted_ms"], 0)
            self.assertAlmostEqual(timings["predicted_per_second"],
                                   1000 / timings["predicted_per_token_ms"], places=6)

    def test_chat_logprobs(self):
        response = client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": "Lily"}], max_tokens=8,
            temperature=0, logprobs=True, top_logprobs=3)
        content = response.choices[0].logprobs.content
        self.assertEqual(len(content), response.usage.completion_tokens)
        for entry in content:
            self.assertLessEqual(entry.logprob, 0)
            self.assertEqual(len(entry.top_logprobs), 3)
            # Greedy: the token drawn is the most likely one.
            self.assertAlmostEqual(entry.logprob, entry.top_logprobs[0].logprob, places=5)
            self.assertEqual(bytes(entry.bytes).decode("utf-8", "replace"), entry.token)


class CompletionTest(unittest.TestCase):
    def test_greedy_completion_equals_kvjit_run(self):
        response = greedy_completion(max_tokens=48)
        self.assertEqual(response.object, "text_completion")
        self.assertEqual(response.choices[0].text, serve_harness.solo_run(PROMPT, 48))
        self.assertEqual(response.choices[0].finish_reason, "length")
        self.assertEqual(response.usage.completion_tokens, 48)

    def test_completion_stream_equals_the_whole_response(self):
        whole = greedy_completion(prompt="The dog", max_tokens=32)
        chunks = list(client.completions.create(model=MODEL_NAME, prompt="The dog", max_tokens=32,
                                                temperature=0, stream=True))
        self.assertEqual("".join(c.choices[0].text for c in chunks), whole.choices[0].text)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "length")

    def test_default_max_tokens_is_16(self):
        response = client.completions.create(model=MODEL_NAME, prompt=PROMPT, temperature=0)
        self.assertEqual(response.usage.completion_tokens, 16)

    def test_prompt_as_token_ids(self):
        ids = subprocess.run([serve_harness.KVJIT, "tokenize", serve_harness.MODEL, PROMPT],
                             capture_output=True, text=True, check=True).stdout.split()
        by_ids = greedy_completion(prompt=[int(i) for i in ids], max_tokens=20)
        by_text = greedy_completion(max_tokens=20)
        self.assertEqual(by_ids.choices[0].text, by_text.choices[0].text)
        self.assertEqual(by_ids.usage.prompt_tokens, len(ids))

    def test_echo(self):
        response = greedy_completion(max_tokens=10, echo=True)
        plain = greedy_completion(max_tokens=10)
        self.assertEqual(response.choices[0].text, PROMPT + plain.choices[0].text)

    def test_stop_string_cuts_the_text(self):
        full = greedy_completion(max_tokens=64).choices[0].text
        self.assertIn("girl", full)
        stopped = greedy_completion(max_tokens=64, stop=["girl", "never appears"])
        self.assertEqual(stopped.choices[0].text, full[:full.index("girl")])
        self.assertEqual(stopped.choices[0].finish_reason, "stop")
        streamed = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=64,
                                             temperature=0, stop="girl", stream=True)
        self.assertEqual("".join(c.choices[0].text for c in streamed), full[:full.index("girl")])

    def test_same_seed_same_text_other_seed_other_text(self):
        def sample(seed):
            return client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=40,
                                             temperature=1.0, seed=seed).choices[0].text
        first, again, other = sample(1234), sample(1234), sample(99)
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)

    def test_n_choices(self):
        response = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=30,
                                             temperature=1.0, seed=7, n=3)
        self.assertEqual([c.index for c in response.choices], [0, 1, 2])
        texts = [c.text for c in response.choices]
        self.assertEqual(len(set(texts)), 3, texts)
        # Choice i samples with seed + i.
        second = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=30,
                                           temperature=1.0, seed=8)
        self.assertEqual(second.choices[0].text, texts[1])
        streamed = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=30,
                                             temperature=1.0, seed=7, n=3, stream=True)
        by_index = {}
        for chunk in streamed:
            for choice in chunk.choices:
                by_index[choice.index] = by_index.get(choice.index, "") + choice.text
        self.assertEqual([by_index[i] for i in range(3)], texts)

    def test_completion_logprobs(self):
        response = greedy_completion(max_tokens=6, logprobs=2)
        logprobs = response.choices[0].logprobs
        self.assertEqual(len(logprobs.tokens), 6)
        self.assertEqual("".join(logprobs.tokens), response.choices[0].text)
        self.assertEqual(logprobs.text_offset[0], 0)
        for token, logprob, top in zip(logprobs.tokens, logprobs.token_logprobs,
                                       logprobs.top_logprobs):
            self.assertLessEqual(len(top), 2)
            self.assertAlmostEqual(logprob, max(top.values()), places=5)
            self.assertTrue(math.isfinite(logprob))

    def test_sampling_fields_are_accepted(self):
        response = client.completions.create(
            model=MODEL_NAME, prompt=PROMPT, max_tokens=12, temperature=0.7, top_p=0.9, seed=3,
            presence_penalty=0.5, frequency_penalty=0.5,
            extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "ignore_eos": True,
                        "some_unknown_field": True})
        self.assertEqual(response.usage.completion_tokens, 12)

    def test_beam_search(self):
        response = client.completions.create(
            model=MODEL_NAME, prompt=PROMPT, max_tokens=12, n=2,
            extra_body={"use_beam_search": True, "best_of": 3, "length_penalty": 1.0})
        self.assertEqual(len(response.choices), 2)
        self.assertNotEqual(response.choices[0].text, response.choices[1].text)


class ServerTest(unittest.TestCase):
    def test_models(self):
        models = client.models.list()
        self.assertEqual([m.id for m in models.data], [MODEL_NAME])

    def test_unknown_model_is_404(self):
        import openai
        with self.assertRaises(openai.NotFoundError):
            client.completions.create(model="gpt-4", prompt=PROMPT, max_tokens=2)

    def test_api_key(self):
        import openai
        keyed = Server("--api_key", "sesame")
        try:
            good = openai.OpenAI(base_url=keyed.url + "/v1", api_key="sesame", max_retries=0)
            self.assertTrue(good.completions.create(model=MODEL_NAME, prompt=PROMPT,
                                                    max_tokens=2).choices)
            bad = openai.OpenAI(base_url=keyed.url + "/v1", api_key="wrong", max_retries=0)
            with self.assertRaises(openai.AuthenticationError):
                bad.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=2)
            status, _, body = keyed.post_json("/v1/completions", {"prompt": PROMPT})
            self.assertEqual(status, 401)
            self.assertEqual(body["error"]["type"], "authentication_error")
            self.assertEqual(keyed.get("/health")[0], 200)
            good.close()
            bad.close()
        finally:
            keyed.close()


if __name__ == "__main__":
    serve_harness.main()
