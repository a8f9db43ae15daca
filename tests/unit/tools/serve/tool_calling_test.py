"""Tool calling through `kvjit serve` on SmolLM2-135M with the official
openai client: SmolLM2's chat template has no tool support, so the server
writes the tools into the prompt in the Hermes format and parses
<tool_call> blocks out of the reply. With tool_choice "required" or a named
function the reply is decoded under the calls' grammar, so even this small
model returns calls whose arguments validate against their schema
(jsonschema). Covers the round trip (the call, the tool's result back, the
answer), streaming tool-call deltas, parallel calls, tool_choice none and
auto, and the 400s of malformed tools.
"""

from __future__ import annotations

import json
import unittest

import serve_harness
from serve_harness import Server

server: Server
client = None
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def setUpModule():
    global server, client
    import openai
    server = Server("--threads", "2")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=90)


def tearDownModule():
    client.close()
    server.close()


def chat(messages, **fields):
    fields.setdefault("temperature", 0)
    fields.setdefault("max_tokens", 120)
    return client.chat.completions.create(model=MODEL_NAME, messages=messages, **fields)


class ToolCallingTest(unittest.TestCase):
    def assert_valid_call(self, call, tools):
        import jsonschema
        schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
        self.assertEqual(call.type, "function")
        self.assertTrue(call.id.startswith("call_"), call.id)
        self.assertIn(call.function.name, schemas)
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, schemas[call.function.name])
        return arguments

    def test_named_function_round_trip(self):
        reply = chat(QUESTION, tools=[WEATHER, TIME],
                     tool_choice={"type": "function", "function": {"name": "get_weather"}})
        choice = reply.choices[0]
        print(f"\n  call: {choice.message.tool_calls}")
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertIsNone(choice.message.content)
        self.assertEqual(len(choice.message.tool_calls), 1)
        call = choice.message.tool_calls[0]
        self.assertEqual(call.function.name, "get_weather")
        self.assert_valid_call(call, [WEATHER])

        history = QUESTION + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id,
             "content": json.dumps({"temperature": 18, "sky": "sunny"})},
        ]
        answer = chat(history, tools=[WEATHER, TIME], max_tokens=60)
        print(f"  answer: {answer.choices[0].message.content!r}")
        self.assertIn(answer.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        message = answer.choices[0].message
        self.assertTrue(message.content or message.tool_calls)
        # The tool's result reached the prompt.
        self.assertGreater(answer.usage.prompt_tokens, reply.usage.prompt_tokens + 10)

    def test_required_single_call_among_several_tools(self):
        reply = chat([{"role": "user", "content": "What time is it in Tokyo?"}],
                     tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=False)
        choice = reply.choices[0]
        print(f"\n  call: {choice.message.tool_calls}")
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertEqual(len(choice.message.tool_calls), 1)
        self.assert_valid_call(choice.message.tool_calls[0], [WEATHER, TIME])

    def test_required_parallel_calls_each_validate(self):
        reply = chat([{"role": "user", "content": "Weather in Paris and in Rome?"}],
                     tools=[WEATHER], tool_choice="required", max_tokens=200)
        calls = reply.choices[0].message.tool_calls
        print(f"\n  {len(calls)} calls, finish {reply.choices[0].finish_reason}")
        self.assertGreaterEqual(len(calls), 1)
        self.assertLessEqual(len(calls), 8)
        for index, call in enumerate(calls):
            self.assert_valid_call(call, [WEATHER])
        self.assertEqual(len({call.id for call in calls}), len(calls))

    def test_streamed_call_deltas_assemble_into_the_call(self):
        stream = chat(QUESTION, tools=[WEATHER],
                      tool_choice={"type": "function", "function": {"name": "get_weather"}},
                      stream=True)
        calls = {}
        finish = None
        content = ""
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            for part in delta.tool_calls or []:
                entry = calls.setdefault(part.index, {"id": None, "name": "", "arguments": ""})
                if part.id:
                    entry["id"] = part.id
                if part.function and part.function.name:
                    entry["name"] += part.function.name
                if part.function and part.function.arguments:
                    entry["arguments"] += part.function.arguments
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(content, "")
        self.assertEqual(list(calls), [0])
        self.assertEqual(calls[0]["name"], "get_weather")
        self.assertTrue(calls[0]["id"].startswith("call_"))
        import jsonschema
        jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER["function"]["parameters"])
        # The same call as the whole response gives (greedy).
        whole = chat(QUESTION, tools=[WEATHER],
                     tool_choice={"type": "function", "function": {"name": "get_weather"}})
        self.assertEqual(json.loads(whole.choices[0].message.tool_calls[0].function.arguments),
                         json.loads(calls[0]["arguments"]))

    def test_tools_reach_the_prompt_unless_tool_choice_is_none(self):
        plain = chat(QUESTION, max_tokens=1)
        offered = chat(QUESTION, tools=[WEATHER], max_tokens=1)
        none = chat(QUESTION, tools=[WEATHER], tool_choice="none", max_tokens=1)
        self.assertGreater(offered.usage.prompt_tokens, plain.usage.prompt_tokens + 50)
        self.assertEqual(none.usage.prompt_tokens, plain.usage.prompt_tokens)

    def test_auto_reply_is_content_or_calls_consistently(self):
        reply = chat(QUESTION, tools=[WEATHER], tool_choice="auto", max_tokens=80)
        choice = reply.choices[0]
        if choice.message.tool_calls:
            self.assertEqual(choice.finish_reason, "tool_calls")
            for call in choice.message.tool_calls:
                self.assert_valid_call(call, [WEATHER])
        else:
            self.assertIn(choice.finish_reason, ("stop", "length"))
            self.assertTrue(choice.message.content)
            self.assertNotIn("</tool_call>", choice.message.content)

    def test_malformed_tools_are_400s_naming_the_field(self):
        import openai
        cases = [
            ({"tools": [{"type": "function", "function": {"description": "no name"}}]},
             "tools[0].function.name"),
            ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
            ({"tools": [WEATHER], "tool_choice": {"type": "function",
                                                 "function": {"name": "nope"}}}, "tool_choice"),
            ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
            ({"tool_choice": "required"}, "tool_choice"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
             "tools[0].function.parameters"),
        ]
        for fields, param in cases:
            with self.subTest(param=param):
                with self.assertRaises(openai.BadRequestError) as raised:
                    client.chat.completions.create(model=MODEL_NAME, messages=QUESTION,
                                                   max_tokens=4, extra_body=fields)
                self.assertEqual(raised.exception.body.get("param"), param, raised.exception.body)
        with self.assertRaises(openai.BadRequestError) as raised:
            client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=4,
                                      extra_body={"tools": [WEATHER]})
        self.assertEqual(raised.exception.body.get("param"), "tools")
        # The server goes on serving.
        self.assertTrue(chat(QUESTION, max_tokens=4).choices[0].message.content is not None)


if __name__ == "__main__":
    serve_harness.main()
