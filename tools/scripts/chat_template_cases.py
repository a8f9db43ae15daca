#!/usr/bin/env python3
"""Writes tests/data/chat_templates/cases.json: chat templates rendered by
Python's jinja2 exactly as Hugging Face transformers' apply_chat_template
renders them, for tools/serve/template's tests to match byte for byte.

    python3 tools/scripts/chat_template_cases.py [--model SmolLM2.gguf] [-o cases.json]

The environment is transformers' (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loop controls; raise_exception and
strftime_now globals; tojson = json.dumps(ensure_ascii=False, ...)), with
strftime_now fixed at NOW (UTC) so that renders are reproducible. The
templates are

- the published templates of tests/data/chat_templates/real/ (Llama 3.1 and
  3.2, Qwen2.5, Qwen3, Gemma 2 and 3, Phi-3 and 3.5, Mistral 7B v0.1 and
  v0.3, Mistral Nemo; README.md there says where each copy comes from),
  rendered with the variables apply_chat_template gives them: the model's
  special tokens, and tools=None, documents=None unless the conversation has
  them;
- the SmolLM2 GGUF's own (read from the file when it is there) and a few
  more model templates written down here, rendered with bos_token "<s>" and
  eos_token "</s>";
- one small template per Jinja feature, and templates that fail (syntax
  errors, raise_exception).

In cases.json, "template_variables" maps a template to the variables every
render of it gets; a context's own members replace them (as the
conversation's tools replace tools=None). jinja2's version is recorded."""

import argparse
import datetime
import json
import os
import struct
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1721995200  # 2024-07-26 12:00:00 UTC


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag: its body rendered as a call block."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(NOW, tz=datetime.timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def read_gguf_chat_template(path):
    """tokenizer.chat_template from a GGUF file's metadata (v2/v3)."""
    scalar_sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        f.read(4)  # version
        _, kv_count = struct.unpack("<QQ", f.read(16))

        def read_string():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8")

        def read_value(kind):
            if kind == 8:
                return read_string()
            if kind == 9:
                element, n = struct.unpack("<IQ", f.read(12))
                if element in scalar_sizes:
                    f.seek(scalar_sizes[element] * n, 1)
                    return None
                return [read_value(element) for _ in range(n)]
            f.seek(scalar_sizes[kind], 1)
            return None

        for _ in range(kv_count):
            key = read_string()
            (kind,) = struct.unpack("<I", f.read(4))
            value = read_value(kind)
            if key == "tokenizer.chat_template":
                return value
    return None


# The SmolLM2-135M-Instruct GGUF's template, as the file holds it (used when
# the model is not at hand).
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
           "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

CHATML_QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
                "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# A later revision of Qwen3's template than Qwen3-0.6B's in real/ (content that
# is not a string, reasoning_content), as widely copied; its origin is not
# pinned down, so it is kept here rather than in real/.
QWEN3 = r'''{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}'''

# Mixtral-8x7B-Instruct-v0.1's template of early 2024, as text-generation-
# inference's router tests copy it (Mistral-7B-Instruct-v0.1's, in real/, adds
# a space after each eos_token).
MISTRAL_V01 = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
               "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
               "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
               "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

DEEPSEEK_R1 = ("{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
               "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}"
               "{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}"
               "{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}"
               "{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}"
               "{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}"
               "{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}"
               "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}"
               "{%- set ns.is_first = true -%}{%- else %}"
               "{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}"
               "{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}"
               "{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}"
               "{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}"
               "{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}"
               "{% set content = content.split('</think>')[-1] %}{% endif %}"
               "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}"
               "{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}"
               "{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}"
               "{%- set ns.is_output_first = false %}{%- else %}"
               "{{'\\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}"
               "{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}"
               "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}")

ZEPHYR = '''{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}'''

LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
          "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
          "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}"
          "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
          "{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

HERMES_TOOLS = r'''{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec['items']) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}


{{- bos_token }}
{{- '<|im_start|>system
' }}
{{- "You are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags. " }}
{{- "<tools>\n" }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\n\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|trim }}
    {%- endfor %}
    {{- '"' }}
    {{- ', "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools>" }}
{{- '<|im_end|>\n' }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- for tool_call in message.tool_calls %}
            {{- '\n<tool_call>\n' }}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '{' }}
            {{- '"name": "' }}
            {{- tool_call.name }}
            {{- '"' }}
            {{- ', '}}
            {%- if tool_call.arguments is defined %}
                {{- '"arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments|tojson }}
                {%- endif %}
            {%- endif %}
            {{- '}' }}
            {{- '\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>tool\n' }}
        {%- endif %}
        {{- '<tool_response>\n' }}
        {{- message.content }}
        {%- if not loop.last %}
            {{- '\n</tool_response>\n' }}
        {%- else %}
            {{- '\n</tool_response>' }}
        {%- endif %}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>' }}
        {%- elif loop.last %}
            {{- '<|im_end|>' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
'''

# A block-style template with indentation, comments and whitespace control of
# every kind, as hand-written templates have.
INDENTED = '''{# A hand-written template: indentation, comments, +/- markers. #}
{% for message in messages %}
    {% if message.role == 'system' %}
        <<{{ message.content }}>>
    {% else %}
        {{ message.role | upper }}: {{ message.content }}
    {%- endif %}

    {%+ if loop.last %}(last){% endif +%}
  {# comment at line start #}
{% endfor %}
{% if add_generation_prompt -%}
    ASSISTANT:
{%- endif %}
'''

# Model templates written down here, each rendered with bos_token "<s>" and
# eos_token "</s>".
MODEL_TEMPLATES = {
    "smollm2_gguf": None,  # filled from the GGUF
    "chatml_qwen2": CHATML_QWEN2,
    "qwen3": QWEN3,
    "mistral_v0_1": MISTRAL_V01,
    "deepseek_r1": DEEPSEEK_R1,
    "zephyr": ZEPHYR,
    "llama2": LLAMA2,
    "hermes_tools": HERMES_TOOLS,
    "indented": INDENTED,
}
MODEL_TEMPLATE_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

# The published templates of tests/data/chat_templates/real/ (file name without
# .jinja), each with its model's special tokens: transformers passes the
# tokenizer's special_tokens_map, which leaves out the tokens a tokenizer does
# not have (Qwen has no bos_token, so it is undefined there). Only the tokens
# the templates use are given.
LLAMA3_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN_TOKENS = {"eos_token": "<|im_end|>"}
GEMMA_TOKENS = {"bos_token": "<bos>", "eos_token": "<eos>"}
PHI3_TOKENS = {"bos_token": "<s>", "eos_token": "<|endoftext|>"}
MISTRAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
PUBLISHED_TEMPLATES = {
    "meta-llama-Llama-3.1-8B-Instruct": LLAMA3_TOKENS,
    "meta-llama-Llama-3.2-3B-Instruct": LLAMA3_TOKENS,
    "Qwen-Qwen2.5-7B-Instruct": QWEN_TOKENS,
    "Qwen-Qwen3-0.6B": QWEN_TOKENS,
    "google-gemma-2-2b-it": GEMMA_TOKENS,
    "google-gemma-3-4b-it": GEMMA_TOKENS,
    "microsoft-Phi-3-mini-4k-instruct": PHI3_TOKENS,
    "microsoft-Phi-3.5-mini-instruct": PHI3_TOKENS,
    "mistralai-Mistral-7B-Instruct-v0.1": MISTRAL_TOKENS,
    "mistralai-Mistral-7B-Instruct-v0.3": MISTRAL_TOKENS,
    "mistralai-Mistral-Nemo-Instruct-2407": MISTRAL_TOKENS,
}
# What apply_chat_template passes besides the special tokens: tools and
# documents are always there, None when the call has none.
APPLY_CHAT_TEMPLATE_DEFAULTS = {"tools": None, "documents": None}


def read_published_templates(root):
    """{"real/<name>": (source, variables)} for PUBLISHED_TEMPLATES, read as bytes
    so that nothing (newline translation, a BOM) changes them."""
    directory = os.path.join(root, "tests", "data", "chat_templates", "real")
    templates = {}
    for name, tokens in PUBLISHED_TEMPLATES.items():
        with open(os.path.join(directory, name + ".jinja"), "rb") as f:
            source = f.read().decode("utf-8")
        templates[f"real/{name}"] = (source, {**tokens, **APPLY_CHAT_TEMPLATE_DEFAULTS})
    return templates


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The unit "},
            "days": {"type": ["integer", "string"], "description": "Forecast days"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the time — in UTC", "parameters": {"type": "object", "properties": {}},
        "return": {"type": "number"}}},
]

def conversation(messages, add_generation_prompt=True, **extra):
    """A context as apply_chat_template's arguments make it, less the special
    tokens, which come with each template (template_variables)."""
    context = {"messages": messages}
    context.update(extra)
    context["add_generation_prompt"] = add_generation_prompt
    return context


def tool_call(arguments, call_id="call12345", name="get_weather"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    "one_user": conversation([{"role": "user", "content": "Hello!"}]),
    "two_turns": conversation([
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "What is 2 + 2?"}]),
    "system_turns": conversation([
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "  Name a color.  "},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"}]),
    "no_generation_prompt": conversation([
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}], add_generation_prompt=False),
    "empty_content": conversation([
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": " "}]),
    "unicode": conversation([
        {"role": "system", "content": "Tu es un assistant. 你好 🌍"},
        {"role": "user", "content": "Ünïcödé — “quotes” ‘single’ \"double\" \\ back\tslash\nnew line"},
        {"role": "assistant", "content": "D'accord ✓ — <b>&amp;</b>"},
        {"role": "user", "content": "日本語でお願いします。"}]),
    "tools_dict_arguments": conversation([
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call({"location": "Paris, France", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 22, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 22°C and clear in Paris."},
        {"role": "user", "content": "Thanks!"}], tools=TOOLS),
    "tools_string_arguments": conversation([
        {"role": "user", "content": "Weather in Oslo and the time?"},
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call("{\"location\": \"Oslo\"}"), tool_call("{}", "call67890", "get_time")]},
        {"role": "tool", "tool_call_id": "call12345", "content": "-3 C"},
        {"role": "tool", "tool_call_id": "call67890", "content": "12:00"},
        {"role": "assistant", "content": "It is -3 C in Oslo at 12:00."}], tools=TOOLS),
    "tools_no_calls": conversation([{"role": "user", "content": "Just say hi."}], tools=TOOLS),
    "thinking": conversation([
        {"role": "user", "content": "Think first: 3*7?"},
        {"role": "assistant", "content": "<think>\n3*7 is 21.\n</think>\n\n21"},
        {"role": "user", "content": "And 4*6?"}], enable_thinking=False),
    "thinking_last": conversation([
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "<think>hmm</think>A.", "reasoning_content": "because"}],
        add_generation_prompt=False),
    "multimodal": conversation([
        {"role": "system", "content": [{"type": "text", "text": "Look closely."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe this. "}]}]),
    "roles_not_alternating": conversation([
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"}]),
    "assistant_first": conversation([{"role": "assistant", "content": "I start."}], add_generation_prompt=False),
    "builtin_tools_date": conversation([
        {"role": "user", "content": "Search for kvjit"}], builtin_tools=["brave_search", "code_interpreter"],
        date_string="01 Jan 2025", tools_in_user_message=False, tools=TOOLS[:1]),
    "system_only": conversation([{"role": "system", "content": "Only a system prompt."}]),
    # A tool loop with reasoning, as Qwen3 writes it back: reasoning_content on
    # the tool-calling turn, <think> in the final answer's content.
    "tools_reasoning": conversation([
        {"role": "system", "content": "Use tools when needed."},
        {"role": "user", "content": "Is it raining in Lima?"},
        {"role": "assistant", "content": "", "reasoning_content": "\nI should check the weather.\n",
         "tool_calls": [tool_call({"location": "Lima", "unit": "celsius"}, "abcDEF123")]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"rain\": false}"},
        {"role": "assistant", "content": "<think>\nNo rain reported.\n</think>\n\nNo, it is dry in Lima."}],
        add_generation_prompt=False, tools=TOOLS[:1], enable_thinking=True),
    # A tool result that is a mapping, not a string (Llama's tojson branch,
    # Mistral's content.content).
    "tool_mapping_content": conversation([
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call({"location": "Rome"}, "rome00001")]},
        {"role": "tool", "tool_call_id": "rome00001", "content": {"content": "18 C", "sky": "cloudy"}}],
        tools=TOOLS[:1]),
    # Llama 3.1's builtin tools: a call to one of them is written as
    # name.call(arg="value") and ends with <|eom_id|>.
    "builtin_tool_call": conversation([
        {"role": "user", "content": "Search the web for kvjit."},
        {"role": "assistant", "content": "", "tool_calls": [tool_call({"query": "kvjit", "count": "3"}, "srch00001",
                                                                      "brave_search")]},
        {"role": "tool", "tool_call_id": "srch00001", "content": "kvjit: a compiler for transformer inference."}],
        builtin_tools=["brave_search", "wolfram_alpha"]),
    # Tools but no user message to put them in (Llama 3.1 refuses).
    "tools_without_user": conversation([{"role": "system", "content": "Tools are ready."}], tools=TOOLS[:1]),
    # Thinking on, a generation prompt, and a tool response sent back as a user
    # message (Qwen3 does not count it as the last query).
    "thinking_tool_response": conversation([
        {"role": "user", "content": "Plan a trip to Kyoto."},
        {"role": "assistant", "content": "Let me check.", "reasoning_content": "Need the weather first.",
         "tool_calls": [tool_call({"location": "Kyoto"}, "kyoto0001")]},
        {"role": "user", "content": "<tool_response>\n{\"sky\": \"clear\"}\n</tool_response>"}],
        tools=TOOLS[:1], enable_thinking=True),
    # One call with string arguments and an id Mistral refuses (not 9 long).
    "tool_call_short_id": conversation([
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("{\"tz\": \"UTC\"}", "t1", "get_time")]},
        {"role": "tool", "tool_call_id": "t1", "content": "12:00"}], tools=TOOLS[1:]),
    "empty_system": conversation([
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi"}]),
}

FEATURE_CONTEXT = {
    "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "  Hello World  ", "name": "bob"},
        {"role": "assistant", "content": "Hi!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "user", "content": "bye"}],
    "s": "  Hello, World!  ", "u": "héllo wörld ñ 日本", "n": 7, "neg": -7, "f": 2.5, "big": 12345678901, "zero": 0,
    "none_value": None, "t": True, "empty": "", "empty_list": [], "empty_dict": {},
    "items": [3, 1, 2, 3], "words": ["b", "A", "c", "a"], "nested": {"a": {"b": {"c": "deep"}}, "list": [10, 20, 30]},
    "d": {"z": 1, "a": 2, "m": [1, 2]}, "floats": [0.1, 1.0, 1e-7, 1e22, 3.14159, -0.0, 100.0],
    "users": [{"name": "ann", "age": 31, "admin": True}, {"name": "Bob", "age": 25}, {"name": "cid", "age": 40, "admin": False}],
    "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
}

FEATURES = [
    # Whitespace control, comments, trim_blocks / lstrip_blocks.
    ("text_only", "plain text\nwith lines\n"),
    ("trailing_newlines", "a\n\n"),
    ("crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n"),
    ("comment", "a{# a comment #}b\n  {# own line #}\nc"),
    ("comment_strip", "a  {#- strip -#}  b"),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter"),
    ("lstrip_blocks", "  {% if true %}\n    body\n  {% endif %}\nend"),
    ("lstrip_inline", "x  {% if true %}y{% endif %}  z"),
    ("lstrip_after_expr", "{{ 'a' }}  {% if true %}b{% endif %}"),
    ("lstrip_plus", "  {%+ if true %}kept{% endif %}"),
    ("trim_plus", "{% if true +%}\nkept newline{% endif %}"),
    ("dash_strip", "a   \n  {%- if true -%}   \n  b  \n  {%- endif -%}  \n  c"),
    ("expr_dash", "a  {{- 'b' -}}  c\n{{ 'd' }}\n"),
    ("expr_no_trim", "{{ 'a' }}\n{{ 'b' }}\n"),
    ("multiline_tag", "{{\n  'a'\n  ~ 'b'\n}}\n{%\n if true\n%}\nX{% endif %}"),
    # Literals and printing.
    ("print_values", "{{ 1 }}|{{ 1.0 }}|{{ 2.50 }}|{{ none }}|{{ None }}|{{ true }}|{{ False }}|{{ 'x' }}|{{ \"y\" }}"),
    ("print_collections", "{{ [1, 'a', none, true, 2.0] }}|{{ {'k': 'v', 'n': [1]} }}|{{ (1, 2) }}|{{ d }}"),
    ("print_floats", "{% for x in floats %}{{ x }} {% endfor %}{{ 1e3 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 0.1 + 0.2 }}"),
    ("print_big", "{{ big }} {{ big * 3 }} {{ -big }}"),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\"' }}|{{ \"q\\\"q\" }}|{{ '\\u00e9\\x41' }}"),
    ("string_repr", "{{ ['it\\'s', \"say \\\"hi\\\"\", 'tab\\t', 'ü'] }}"),
    ("adjacent_strings", "{{ 'a' 'b' \"c\" }}"),
    ("undefined_print", "[{{ nope }}][{{ nope is defined }}][{{ nope is undefined }}][{{ messages[0].nothing }}]"),
    # Operators.
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }}"),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 2 * 3 }} {{ ('a' ~ 1) + 'b' }} {{ not true or true }} {{ not (true or true) }}"),
    ("concat", "{{ 'a' + 'b' }}{{ 'x' ~ 1 ~ none ~ true ~ nope }}{{ [1] + [2, 3] }}{{ 'ab' * 3 }}{{ 2 * 'c' }}"),
    ("comparison", "{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ 2 >= 3 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] == [1, 2] }} {{ none == none }} {{ nope == nope }} {{ 'a' != 'a' }} {{ [1, 2] < [1, 3] }}"),
    ("in_operator", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'z' in d }} {{ 'q' not in d }} {{ 'x' not in 'xyz' }} {{ {'a': 1} in [{'a': 1}] }} {{ 'role' in messages[0] }}"),
    ("boolean_ops", "{{ true and 'x' }}|{{ 0 or 'y' }}|{{ '' or none }}|{{ 'a' and '' }}|{{ nope or 'fallback' }}|{{ not empty_list }}"),
    ("ternary", "{{ 'yes' if n > 5 else 'no' }} {{ 'a' if false else 'b' if true else 'c' }} [{{ 'x' if false }}] {{ ('p' if t else 'q') ~ '!' }}"),
    ("unary", "{{ -n }} {{ +n }} {{ - -n }} {{ -f }} {{ -(n + 1) }} {{ -n|abs }}"),
    # Attribute and item access, slicing.
    ("attribute_item", "{{ messages[1].role }} {{ messages[1]['content'] }} {{ nested.a.b.c }} {{ nested['a']['b'].c }} {{ nested.list.1 }} {{ nested.list[-1] }} {{ d['m'][0] }}"),
    ("missing_things", "[{{ d.missing }}][{{ d['missing'] }}][{{ nested.list[10] }}][{{ (d.missing is defined) }}][{{ d.get('missing', 'dflt') }}][{{ d.get('z') }}][{{ d.get('none') }}]"),
    ("slicing", "{{ items[1:] }} {{ items[:2] }} {{ items[::-1] }} {{ items[-2:] }} {{ items[::2] }} {{ s[2:7] }} {{ u[::-1] }} {{ u[1:4] }} {{ items[5:] }} {{ items[3:1:-1] }}"),
    ("string_index", "{{ s[2] }}{{ u[1] }}{{ u[-1] }}{{ 'abc'[0] }}"),
    ("dict_methods_attr", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.items() | list }}"),
    # String methods.
    ("string_methods", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ s.upper() }}][{{ s.lower() }}][{{ 'hello world'.title() }}][{{ 'hELLO'.capitalize() }}]"),
    ("strip_chars", "[{{ 'xxhixx'.strip('x') }}][{{ '\\n\\nhi\\n'.lstrip('\\n') }}][{{ 'abcba'.rstrip('ab') }}][{{ '  日本  '.strip() }}]"),
    ("split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'x</think>y</think>z'.split('</think>')[-1] }} {{ 'a-b-c'.rsplit('-', 1) }}"),
    ("startswith_endswith", "{{ s.strip().startswith('Hello') }} {{ s.endswith('  ') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }}"),
    ("replace_method", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.replace('', '-') }}"),
    ("find_count", "{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ 'hello'.rfind('l') }} {{ ', '.join(['a', 'b']) }}"),
    ("string_predicates", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'Abc'.islower() }} {{ 'ABC'.isupper() }} {{ ' '.isspace() }} {{ ''.isdigit() }}"),
    ("unicode_case", "{{ u.upper() }} {{ 'ÉCOLE'.lower() }} {{ u | length }} {{ u.title() }}"),
    # Filters.
    ("filter_trim", "[{{ s | trim }}][{{ '\\n x \\n' | trim }}][{{ 'xxyxx' | trim('x') }}][{{ nope | trim }}]"),
    ("filter_length", "{{ items | length }} {{ s | length }} {{ d | length }} {{ u | count }} {{ nope | length }} {{ empty | length }}"),
    ("filter_default", "{{ nope | default('dflt') }} {{ nope | d('d2') }} {{ empty | default('e') }} {{ empty | default('e', true) }} {{ none_value | default('n') }} {{ none_value | default('n', boolean=true) }} [{{ nope | default }}]"),
    ("filter_items", "{% for k, v in d | items %}{{ k }}:{{ v }} {% endfor %}{{ nope | items | list }}"),
    ("filter_selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ users | selectattr('admin') | map(attribute='name') | join(',') }} {{ users | selectattr('admin', 'defined') | list | length }} {{ users | selectattr('age', 'gt', 30) | map(attribute='name') | list }}"),
    ("filter_rejectattr", "{{ users | rejectattr('admin') | map(attribute='name') | list }} {{ messages | rejectattr('role', 'in', ['system', 'assistant']) | list | length }}"),
    ("filter_select", "{{ items | select('odd') | list }} {{ items | reject('equalto', 3) | list }} {{ [0, 1, '', 'a', none] | select | list }}"),
    ("filter_map", "{{ users | map(attribute='name') | map('upper') | join(' ') }} {{ users | map(attribute='missing', default='?') | list }} {{ ['a', 'b'] | map('upper') | list }}"),
    ("filter_join", "{{ items | join }} {{ items | join(', ') }} {{ users | join('/', attribute='name') }} {{ 'abc' | join('-') }}"),
    ("filter_first_last", "{{ items | first }} {{ items | last }} {{ 'xyz' | first }} {{ 'xyz' | last }} [{{ empty_list | first }}] {{ d | first }}"),
    ("filter_list", "{{ 'abc' | list }} {{ d | list }} {{ items | list }} {{ nope | list }}"),
    ("filter_tojson", "{{ d | tojson }}|{{ users[0] | tojson }}|{{ 'é \"q\" \\n' | tojson }}|{{ floats | tojson }}|{{ none_value | tojson }}|{{ [true, false] | tojson }}"),
    ("filter_tojson_indent", "{{ d | tojson(indent=2) }}\n{{ nested | tojson(indent=4) }}\n{{ empty_dict | tojson(indent=2) }}{{ empty_list | tojson(indent=2) }}\n{{ [[], {}] | tojson(indent=1) }}"),
    ("filter_tojson_options", "{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ u | tojson(ensure_ascii=true) }}|{{ '🌍' | tojson(true) }}"),
    ("filter_string_int", "{{ 12 | string ~ 'x' }} {{ none | string }} {{ '42' | int + 1 }} {{ '3.7' | int }} {{ 3.9 | int }} {{ 'x' | int }} {{ 'x' | int(5) }} {{ '2.5' | float }} {{ 3 | float }}"),
    ("filter_case", "{{ 'hello WORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hELLO wORLD' | capitalize }} {{ 'hello big-world (x)' | title }}"),
    ("filter_replace", "{{ 'a-b-c' | replace('-', '+') }} {{ 'aaaa' | replace('a', 'b', 2) }} {{ 12321 | replace('2', 'x') }}"),
    ("filter_safe_escape", "{{ '<b>&' | safe }} {{ '<a href=\"x\">\\'</a>' | e }} {{ '<>' | escape }}"),
    ("filter_unique", "{{ items | unique | list }} {{ words | unique | list }} {{ words | unique(case_sensitive=true) | list }} {{ users | unique(attribute='admin') | map(attribute='name') | list }}"),
    ("filter_numbers", "{{ neg | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }}"),
    ("filter_sort", "{{ items | sort }} {{ items | sort(reverse=true) }} {{ words | sort }} {{ words | sort(case_sensitive=true) }} {{ users | sort(attribute='age') | map(attribute='name') | list }} {{ d | dictsort }}"),
    ("filter_reverse_sum", "{{ items | reverse | list }} {{ 'abc' | reverse }} {{ items | sum }} {{ users | sum(attribute='age') }} {{ items | min }} {{ items | max }} {{ words | max }}"),
    ("filter_indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'x\\n\\ny' | indent(width=1, blank=true) }}"),
    ("filter_wordcount", "{{ 'Hello, big world!' | wordcount }}"),
    ("filter_chain", "{{ s | trim | lower | replace('world', 'there') | length }} {{ messages | map(attribute='role') | unique | join(',') | upper }}"),
    # Tests.
    ("tests_types", "{{ s is string }} {{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ f is float }} {{ d is mapping }} {{ items is mapping }} {{ items is iterable }} {{ s is iterable }} {{ n is iterable }} {{ items is sequence }} {{ d is sequence }} {{ none_value is none }} {{ t is boolean }} {{ nope is iterable }}"),
    ("tests_values", "{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ n is eq 7 }} {{ n is equalto(8) }} {{ n is ne 7 }} {{ n is lt 10 }} {{ n is gt(10) }} {{ n is ge 7 }} {{ n is le 6 }} {{ 'a' is in 'abc' }} {{ 'abc' is lower }} {{ 'ABC' is upper }}"),
    ("tests_not", "{{ nope is not defined }} {{ n is not none }} {{ s is not string }} {{ not n is none }}"),
    ("tests_callable_sameas", "{{ raise_exception is callable }} {{ s is callable }} {{ none_value is sameas none }} {{ t is sameas true }} {{ 1 is sameas true }}"),
    # Statements.
    ("if_elif_else", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}other{% endif %} {% endfor %}"),
    ("for_loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
    ("for_prev_next", "{% for x in items %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %}{% for x in items %}{{ loop.cycle('a', 'b') }}{% endfor %}"),
    ("for_else", "{% for x in empty_list %}never{% else %}empty{% endfor %} {% for x in nope %}never{% else %}undefined{% endfor %}"),
    ("for_if_filter", "{% for x in items if x > 1 %}{{ x }}{{ loop.index }}/{{ loop.length }} {% endfor %}{% for m in messages if m.role == 'user' %}{{ m.content | trim }};{% endfor %}"),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %} {% for k in d %}{{ k }}{% endfor %}"),
    ("for_string_dict", "{% for c in 'héllo' %}{{ c }}.{% endfor %} {% for key in nested %}{{ key }}{% endfor %}"),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}:{{ loop.index }} {% endfor %}"),
    ("loop_controls", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("range_forms", "{{ range(3) | list }} {{ range(2, 5) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}"),
    ("set_basic", "{% set x = 5 %}{% set y = x * 2 %}{{ x }} {{ y }}{% set a, b = 1, 2 %} {{ a }}{{ b }}{% set t = (1, 2) %} {{ t }}"),
    ("set_scoping_loop", "{% set x = 'outer' %}{% for i in [1, 2] %}{{ x }}{% set x = 'inner' ~ i %}{{ x }} {% endfor %}{{ x }}"),
    ("set_scoping_if", "{% if true %}{% set y = 'from-if' %}{% endif %}{{ y }}"),
    ("set_loop_iterations", "{% for i in range(3) %}{% if i == 0 %}{% set z = 'first' %}{% endif %}[{{ z }}]{% endfor %}"),
    ("set_block", "{% set block %}\n  Hello {{ 'there' }}\n{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}"),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}{% set ns2 = namespace({'a': 1}, b=2) %} {{ ns2.a }}{{ ns2.b }}"),
    ("macro", "{% macro greet(name, greeting='Hello') -%}\n{{ greeting }}, {{ name }}!\n{%- endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cid') }} [{{ greet() }}]"),
    ("macro_recursive", "{% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v.items() %}{{ k }}:{{ render(x) }}{% if not loop.last %},{% endif %}{% endfor %}{{ '}' }}{% elif v is string %}'{{ v }}'{% elif v is iterable %}[{% for x in v %}{{ render(x) }}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(nested) }}"),
    ("macro_sees_globals", "{% set g = 'top' %}{% macro m() %}{{ g }}-{{ n }}{% endmacro %}{{ m() }}"),
    ("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}{% filter trim | replace(' ', '_') %}  a b  {% endfilter %}"),
    ("with_block", "{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]"),
    ("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}"),
    ("dict_list_literals", "{% set m = {'role': 'user', 'content': 'x', 1: 'one'} %}{{ m.role }}{{ m[1] }}{{ m | length }}{% set l = [1, [2, 3], {'a': [4]}] %}{{ l[1][0] }}{{ l[2].a[0] }}"),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict(a=1).a }}"),
    ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%A %B') }}"),
    ("message_loop_chatml", "{% for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content | trim + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    ("tool_call_access", "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments | tojson }}){% endfor %}{% endif %}{% endfor %}"),
    ("attribute_methods", "{{ d.items | string | length > 0 }} {{ 'x'.upper is callable }}"),
    ("undefined_ops", "{{ nope | default(1) + 1 }} {{ (nope or 0) + 1 }} {{ nope is defined and nope.x }} {{ [nope] | length }}"),
    ("none_attribute", "[{{ none_value.x }}][{{ none_value.x is defined }}]"),
    ("raw_loop_messages", "{% set loop_messages = messages[1:] if messages[0].role == 'system' else messages %}{{ loop_messages | length }}{% for m in loop_messages %}{{ m.role[0] }}{% endfor %}"),
]

ERRORS = [
    ("raise_exception", "{% if messages | length > 0 %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"),
    ("raise_exception_line3", "a\nb\n{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"),
    ("raise_exception_in_macro", "{% macro check(m) %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endmacro %}{% for m in messages %}{{ check(m) }}{% endfor %}"),
    ("raise_exception_unicode", "{{ raise_exception('Fehler: ungültig — ✗') }}"),
    ("syntax_unclosed_for", "{% for m in messages %}\n{{ m.role }}\n"),
    ("syntax_unclosed_if", "line1\n{% if true %}\nx\n{% for a in b %}{% endfor %}"),
    ("syntax_unknown_tag", "a\n\n{% frobnicate %}"),
    ("syntax_stray_endif", "{% for x in y %}\n{% endif %}\n{% endfor %}"),
    ("syntax_stray_endfor", "ok\n{% endfor %}"),
    ("syntax_bad_expression", "{{ 1 + }}"),
    ("syntax_unclosed_expression", "a\nb {{ 'x'\n"),
    ("syntax_unclosed_string", "{{ 'abc }}"),
    ("syntax_unclosed_comment", "a\n{# never closed"),
    ("syntax_unbalanced_paren", "{{ (1 + 2 }}"),
    ("syntax_extra_paren", "\n\n{{ 1 + 2) }}"),
    ("syntax_missing_in", "{% for x items %}{% endfor %}"),
    ("syntax_bad_set", "{% set = 1 %}"),
    ("syntax_else_twice", "{% if a %}1{% else %}2{% else %}3{% endif %}"),
    ("syntax_elif_after_else", "{% if a %}1{% else %}2{% elif b %}3{% endif %}"),
    ("syntax_unknown_filter", "a\n{{ x | no_such_filter }}"),
    ("syntax_unknown_test", "{% if x is no_such_test %}{% endif %}"),
    ("syntax_bad_char", "{{ a $ b }}"),
    ("syntax_endmacro_missing", "{% macro m() %}\nbody"),
    ("syntax_chained_is", "{{ a is defined is defined }}"),
    ("runtime_undefined_attribute", "{{ nope.attribute }}"),
    ("runtime_undefined_item_chain", "line1\n{{ d.missing.deeper }}"),
    ("runtime_undefined_call", "{{ nope() }}"),
    ("runtime_undefined_add", "{{ nope + 1 }}"),
    ("runtime_not_callable", "{{ s() }}"),
    ("runtime_division_by_zero", "{{ n / zero }}"),
    ("runtime_concat_types", "{{ 'a' + 1 }}"),
    ("runtime_compare_types", "{{ 'a' < 1 }}"),
    ("runtime_sandbox_append", "{{ items.append(4) }}"),
    ("runtime_not_iterable", "{% for x in n %}{% endfor %}"),
    ("runtime_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
    ("runtime_namespace_assign", "{% set x = 1 %}{% set x.y = 2 %}"),
    ("runtime_tojson_undefined", "{{ nope | tojson }}"),
    ("runtime_concat_precedence", "{{ 1 + 2 ~ 3 }}"),
    ("runtime_map_undefined_path", "{{ messages | map(attribute='tool_calls.0.function.name') | list }}"),
    ("runtime_range_too_big", "{{ range(1000000) | length }}"),
]


def render_case(env, source, context):
    try:
        template = env.from_string(source)
        return {"expected": template.render(**context)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": {"type": type(e).__name__, "message": e.message, "line": e.lineno}}
    except Exception as e:  # noqa: BLE001 - every failure is a case
        return {"error": {"type": type(e).__name__, "message": str(e)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    default_model = os.path.join(os.environ.get("KVJIT_MODEL_DIR") or os.path.expanduser("~/.cache/kvjit/models"),
                                 "SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--model", default=default_model, help="the SmolLM2 GGUF whose template to include")
    parser.add_argument("-o", "--output", default=os.path.join(root, "tests", "data", "chat_templates", "cases.json"))
    args = parser.parse_args()

    templates = dict(MODEL_TEMPLATES)
    templates["smollm2_gguf"] = SMOLLM2
    if os.path.exists(args.model):
        from_file = read_gguf_chat_template(args.model)
        if from_file is None:
            sys.exit(f"{args.model} has no tokenizer.chat_template")
        if from_file != SMOLLM2:
            print("note: the GGUF's template differs from the built-in copy; using the file's", file=sys.stderr)
        templates["smollm2_gguf"] = from_file
    else:
        print(f"note: {args.model} not found; using the built-in copy of its template", file=sys.stderr)
    variables = {name: MODEL_TEMPLATE_TOKENS for name in MODEL_TEMPLATES}
    for name, (source, template_variables) in read_published_templates(root).items():
        templates[name] = source
        variables[name] = template_variables

    env = make_environment()
    contexts = dict(CONVERSATIONS)
    contexts["features"] = FEATURE_CONTEXT
    cases = []
    # Every model template over every conversation: where a template refuses
    # one (Gemma's system role, roles that do not alternate, Mistral's tool
    # call ids), the case expects its error.
    for template_name in variables:
        for conversation_name, context in CONVERSATIONS.items():
            case = {"name": f"{template_name}/{conversation_name}", "template": template_name,
                    "context": conversation_name}
            case.update(render_case(env, templates[template_name], {**variables[template_name], **context}))
            cases.append(case)
    for kind, entries in (("feature", FEATURES), ("error", ERRORS)):
        for name, source in entries:
            key = f"{kind}_{name}"
            templates[key] = source
            case = {"name": f"{kind}/{name}", "template": key, "context": "features"}
            case.update(render_case(env, source, FEATURE_CONTEXT))
            if kind == "error" and "error" not in case:
                sys.exit(f"error case {name} rendered without an error")
            cases.append(case)

    document = {
        "generator": "tools/scripts/chat_template_cases.py",
        "jinja2_version": jinja2.__version__,
        "now": NOW,
        "templates": templates,
        "template_variables": variables,
        "contexts": contexts,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"wrote {len(cases)} cases ({errors} errors) over {len(templates)} templates to {args.output}")


if __name__ == "__main__":
    main()
