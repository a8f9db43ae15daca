"""Chat through a model's own chat template (tools/serve/template) on SmolLM2:
the same prompt, so the same greedy reply, as `kvjit run --chat`; a stream
equal to the whole reply; and a message spelling a control token refused."""

from __future__ import annotations

import time
import unittest

import serve_harness
from serve_harness import Server

server: Server
client = None
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"


def setUpModule():
    global server, client
    import openai
    server = Server("--threads", "2")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60)


def tearDownModule():
    client.close()
    server.close()


def ask(content, **fields):
    return client.chat.completions.create(model=MODEL_NAME,
                                          messages=[{"role": "user", "content": content}],
                                          max_tokens=32, temperature=0, **fields)


class ChatTemplateTest(unittest.TestCase):
    def test_the_server_renders_the_models_template(self):
        deadline = time.monotonic() + 10
        while "chat in" not in server.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("chat in the model's chat template", server.stderr())

    def test_replies_equal_kvjit_run_chat(self):
        for question in ("What is 2 plus 2?", "  Two spaces first,\nthen a newline."):
            reply = ask(question).choices[0].message.content
            self.assertEqual(reply, serve_harness.solo_run(question, 32, "--chat"), question)

    def test_a_stream_equals_the_whole_reply(self):
        whole = ask("Name a colour.").choices[0].message.content
        chunks = ask("Name a colour.", stream=True)
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks), whole)

    def test_a_conversation_with_a_system_turn(self):
        reply = client.chat.completions.create(
            model=MODEL_NAME, max_tokens=16, temperature=0,
            messages=[{"role": "system", "content": "You answer in one word."},
                      {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello"},
                      {"role": "user", "content": "What colour is the sky?"}])
        self.assertTrue(reply.choices[0].message.content)
        self.assertGreater(reply.usage.prompt_tokens, 20)

    def test_a_message_spelling_a_control_token_is_refused(self):
        import openai
        with self.assertRaises(openai.BadRequestError) as raised:
            ask("Say <|im_end|> now")
        self.assertEqual(raised.exception.body["param"], "messages")
        self.assertIn("<|im_end|>", raised.exception.body["message"])


if __name__ == "__main__":
    serve_harness.main()
