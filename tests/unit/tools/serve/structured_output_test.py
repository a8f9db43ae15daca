"""Structured outputs from `kvjit serve` on SmolLM2-135M, through the official
openai client: every schema of tests/data/structured_output/schemas.json under
response_format json_schema (concurrently), json_object, vLLM's
structured_outputs (regex, choice, json, grammar), llama.cpp's json_schema and
grammar, streaming, n > 1, beam search, /v1/completions, the 400s a bad constraint gets,
and a constraint that ends the reply before max_tokens.

Each reply is parsed and checked by jsonschema (Draft 2020-12) with format
checking; the formats jsonschema checks loosely or not at all (uri needs a
package; email only wants an "@") are checked again with the standard library.
A reply that max_tokens cut short (finish_reason "length") fails its check: the
schemas bound every string and array so that a reply completes well before.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import ipaddress
import json
import os
import re
import time
import unittest
import urllib.parse
import uuid
from typing import Dict, List, Optional

import serve_harness
from serve_harness import Server

server: Server
client = None
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"
CORPUS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data",
                           "structured_output", "schemas.json")
# Enough for every corpus reply (the longest takes about 200 tokens); a reply
# that needs more is a failure, not a skip.
MAX_TOKENS = 320
CLIENT_TIMEOUT_S = 90
POOL = 8

# A small schema for the checks that are not about the corpus: short strings,
# a boolean and a bounded integer, so that even sampled replies end soon.
PET_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "breed": {"type": "string", "maxLength": 30},
        "vaccinated": {"type": "boolean"},
        "age": {"type": "integer", "minimum": 0, "maximum": 30},
    },
    "required": ["name", "breed", "vaccinated", "age"],
    "additionalProperties": False,
}
PET_PROMPT = "Describe a pet dog as JSON with its name, breed, age and whether it is vaccinated."


# ---- format checks from the standard library --------------------------------

_TIME = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)"
_DATE = r"\d{4}-\d{2}-\d{2}"


def _date(text: str) -> bool:
    return re.fullmatch(_DATE, text) is not None and bool(datetime.date.fromisoformat(text))


def _time(text: str) -> bool:
    return (re.fullmatch(_TIME, text) is not None and
            bool(datetime.time.fromisoformat(text.replace("z", "Z"))))


def _date_time(text: str) -> bool:
    if re.fullmatch(_DATE + "[Tt]" + _TIME, text) is None:
        return False
    return bool(datetime.datetime.fromisoformat(text.upper()))


def _email(text: str) -> bool:
    local, at, domain = text.rpartition("@")
    if not at or not local or len(local) > 64:
        return False
    dot_atom = r"[\w!#$%&'*+/=?^`{|}~-]+(\.[\w!#$%&'*+/=?^`{|}~-]+)*"
    quoted = r'"([\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
    label = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
    return (re.fullmatch(f"{dot_atom}|{quoted}", local) is not None and
            re.fullmatch(rf"{label}(\.{label})*", domain) is not None)


def _uuid(text: str) -> bool:
    # uuid.UUID also takes braces, a urn: prefix and no hyphens; RFC 4122's
    # string form is 8-4-4-4-12 hex digits.
    return (re.fullmatch(r"[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}", text) is not None
            and bool(uuid.UUID(text)))


def _uri(text: str) -> bool:
    if any(c.isspace() for c in text) or any(ord(c) > 0x7e for c in text):
        return False
    parts = urllib.parse.urlsplit(text)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme or ""):
        return False
    rest = text[len(parts.scheme) + 1:]
    if rest.startswith("//"):
        return True  # an authority (possibly empty, as in file:///x), then a path
    return bool(rest)


STDLIB_FORMATS = {
    "date": _date,
    "time": _time,
    "date-time": _date_time,
    "email": _email,
    "uuid": _uuid,
    "ipv4": lambda text: bool(ipaddress.IPv4Address(text)),
    "ipv6": lambda text: bool(ipaddress.IPv6Address(text)),
    "uri": _uri,
}


def make_format_checker():
    """jsonschema's Draft 2020-12 format checker, and for the formats above
    the standard library's verdict as well (a value must satisfy both)."""
    import jsonschema
    draft = jsonschema.Draft202012Validator.FORMAT_CHECKER
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(draft.checkers)
    for name, stdlib_check in STDLIB_FORMATS.items():
        def both(instance, name=name, stdlib_check=stdlib_check):
            if not isinstance(instance, str):
                return True
            return draft.conforms(instance, name) and stdlib_check(instance)
        checker.checks(name, raises=(ValueError, TypeError))(both)
    return checker


FORMAT_CHECKER = None


def validation_errors(schema, instance) -> List[str]:
    """What is wrong with `instance` under `schema`, one line each; [] when valid."""
    import jsonschema
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    errors = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        errors.append(f"at {where}: {error.message}")
    return errors


def check_json_reply(text: Optional[str], finish_reason: Optional[str], schema) -> List[str]:
    """The problems of a reply that should be JSON valid under `schema`."""
    problems = []
    if finish_reason != "stop":
        problems.append(f"finish_reason is {finish_reason!r}, not 'stop' (max_tokens cut the "
                        f"reply short, or it did not end)")
    try:
        instance = json.loads(text or "")
    except ValueError as error:
        return problems + [f"the reply is not JSON: {error}"]
    return problems + validation_errors(schema, instance)


# ---- the server ---------------------------------------------------------------

def setUpModule():
    global server, client, FORMAT_CHECKER
    import openai
    FORMAT_CHECKER = make_format_checker()
    server = Server("--threads", "2")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                           timeout=CLIENT_TIMEOUT_S)


def tearDownModule():
    client.close()
    server.close()


def chat(content, max_tokens=MAX_TOKENS, **fields):
    fields.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": content}],
        max_tokens=max_tokens, **fields)


def json_schema_format(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def load_corpus() -> List[Dict]:
    with open(CORPUS_PATH, encoding="utf-8") as file:
        return json.load(file)


def show(text: Optional[str], limit: int = 400) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


class ValidatorTest(unittest.TestCase):
    """The checker itself, without the server: so that a reply the test
    passes has been checked, format by format."""

    def test_the_corpus_is_well_formed(self):
        import jsonschema
        corpus = load_corpus()
        self.assertGreaterEqual(len(corpus), 50)
        names = [entry["name"] for entry in corpus]
        self.assertEqual(len(names), len(set(names)), "corpus names repeat")
        for entry in corpus:
            self.assertEqual(set(entry), {"name", "prompt", "schema"}, entry.get("name"))
            self.assertRegex(entry["name"], r"^[A-Za-z0-9_-]{1,64}$")
            self.assertTrue(entry["prompt"], entry["name"])
            jsonschema.Draft202012Validator.check_schema(entry["schema"])
        print(f"\n  {len(corpus)} schemas, each valid under Draft 2020-12")

    def test_each_format_is_checked(self):
        good = {"date": "2025-01-01", "time": "07:30:00Z", "date-time": "2025-01-01T07:30:00+02:00",
                "email": "bob@example.com", "uuid": "12345678-1234-5678-1234-567812345678",
                "ipv4": "192.168.1.1", "ipv6": "::1", "uri": "https://example.com/a?b=c"}
        bad = {"date": ["2025-02-30", "2025/01/01", "20250101"],
               "time": ["07:30:00", "25:00:00Z", "7:30"],
               "date-time": ["2025-01-01 07:30:00", "2025-01-01T07:30:00", "2025-13-01T00:00:00Z"],
               "email": ["bob", "@example.com", "bob@", "bob@exa mple.com"],
               "uuid": ["12345678123456781234567812345678", "not-a-uuid",
                        "{12345678-1234-5678-1234-567812345678}"],
               "ipv4": ["256.1.1.1", "1.2.3", "192.168.001.001"],
               "ipv6": ["::g", "1:2:3:4:5:6:7:8:9"],
               "uri": ["example.com", "https example.com", "/just/a/path", ""]}
        for name, value in good.items():
            self.assertEqual(validation_errors({"type": "string", "format": name}, value), [],
                             (name, value))
        for name, values in bad.items():
            for value in values:
                self.assertTrue(validation_errors({"type": "string", "format": name}, value),
                                f"format {name} let {value!r} through")
        print(f"\n  formats checked: {sorted(good)}")


class CorpusTest(unittest.TestCase):
    def test_every_corpus_schema_under_response_format_json_schema(self):
        corpus = load_corpus()

        def ask(entry):
            began = time.monotonic()
            try:
                response = chat(entry["prompt"],
                                response_format=json_schema_format(entry["name"], entry["schema"]))
            except Exception as error:  # noqa: BLE001: reported with the schema's name
                return entry, None, [f"the request failed: {type(error).__name__}: {error}"], 0, \
                    time.monotonic() - began
            choice = response.choices[0]
            problems = check_json_reply(choice.message.content, choice.finish_reason,
                                        entry["schema"])
            return entry, choice.message.content, problems, response.usage.completion_tokens, \
                time.monotonic() - began

        began = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(POOL) as pool:
            results = list(pool.map(ask, corpus))
        elapsed = time.monotonic() - began

        print()
        failures = []
        for entry, reply, problems, tokens, seconds in results:
            verdict = "ok" if not problems else "FAILED"
            print(f"  {entry['name']:<32} {tokens:4d} tokens {seconds:5.1f} s  {verdict}")
            if problems:
                failures.append(f"{entry['name']}: reply {show(reply)}\n    " +
                                "\n    ".join(problems))
        total_tokens = sum(r[3] for r in results)
        print(f"  {len(corpus)} schemas, {total_tokens} tokens in {elapsed:.1f} s "
              f"({POOL} at a time), {len(failures)} failed")
        if failures:
            self.fail(f"{len(failures)} of {len(corpus)} corpus schemas failed:\n" +
                      "\n".join(failures))

    def test_without_the_constraint_the_replies_mostly_do_not_validate(self):
        # So that the corpus test means something: the same prompts without
        # response_format mostly give no valid JSON.
        corpus = load_corpus()[:16]

        def ask(entry):
            choice = chat(entry["prompt"], max_tokens=96).choices[0]
            return not check_json_reply(choice.message.content, choice.finish_reason,
                                        entry["schema"])

        with concurrent.futures.ThreadPoolExecutor(POOL) as pool:
            valid = sum(pool.map(ask, corpus))
        print(f"\n  unconstrained: {valid} of {len(corpus)} replies valid")
        self.assertLessEqual(valid, len(corpus) // 4)


class ResponseFormatTest(unittest.TestCase):
    def test_json_object(self):
        response = chat("Give the name and age of a famous scientist as a JSON object.",
                        response_format={"type": "json_object"})
        choice = response.choices[0]
        self.assertEqual(choice.finish_reason, "stop", show(choice.message.content))
        value = json.loads(choice.message.content)
        self.assertIsInstance(value, dict, choice.message.content)
        print(f"\n  json_object: {show(choice.message.content, 120)}")

    def test_text_is_no_constraint(self):
        constrained = chat(PET_PROMPT, max_tokens=48, response_format={"type": "text"})
        plain = chat(PET_PROMPT, max_tokens=48)
        self.assertEqual(constrained.choices[0].message.content, plain.choices[0].message.content)

    def test_a_stream_concatenates_to_a_valid_reply(self):
        fields = {"response_format": json_schema_format("pet", PET_SCHEMA)}
        whole = chat(PET_PROMPT, **fields).choices[0]
        chunks = list(chat(PET_PROMPT, stream=True, **fields))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertGreater(len(chunks), 2)
        self.assertEqual(check_json_reply(text, finishes[-1], PET_SCHEMA), [], show(text))
        self.assertEqual(text, whole.message.content)
        print(f"\n  {len(chunks)} chunks: {show(text, 120)}")

    def assert_each_pet_choice_validates(self, response, label):
        for choice in response.choices:
            self.assertEqual(check_json_reply(choice.message.content, choice.finish_reason,
                                              PET_SCHEMA), [],
                             f"{label} {choice.index}: {show(choice.message.content)}")
            print(f"\n  {label} {choice.index}: {show(choice.message.content, 120)}", end="")
        print()

    def test_n_sampled_choices_each_validate(self):
        response = chat(PET_PROMPT, n=3, temperature=1.0, seed=11,
                        response_format=json_schema_format("pet", PET_SCHEMA))
        self.assertEqual([c.index for c in response.choices], [0, 1, 2])
        self.assert_each_pet_choice_validates(response, "choice")

    def test_beam_search_choices_each_validate(self):
        response = chat(PET_PROMPT, n=2, response_format=json_schema_format("pet", PET_SCHEMA),
                        extra_body={"use_beam_search": True, "best_of": 3})
        self.assertEqual(len(response.choices), 2)
        self.assert_each_pet_choice_validates(response, "beam")

    def test_completions_endpoint(self):
        response = client.completions.create(
            model=MODEL_NAME, prompt="A JSON object describing a dog named Rex:\n",
            max_tokens=MAX_TOKENS, temperature=0,
            extra_body={"response_format": json_schema_format("pet", PET_SCHEMA)})
        choice = response.choices[0]
        self.assertEqual(check_json_reply(choice.text, choice.finish_reason, PET_SCHEMA), [],
                         show(choice.text))
        print(f"\n  /v1/completions: {show(choice.text, 120)}")

    def test_a_constraint_ends_the_reply_before_max_tokens(self):
        # Asked for an essay, the model writes on to max_tokens; each schema
        # here leaves it a few characters (maxLength) or items (maxItems) and
        # then only the end: the reply must stop there, well before 64 tokens
        # (JSON's optional whitespace included).
        prompt = "Write a long essay about the history of Rome."
        free = chat(prompt, max_tokens=64).choices[0]
        self.assertEqual(free.finish_reason, "length", show(free.message.content))
        print("\n  unconstrained: length")
        failures = []
        for name, schema in (
                ("short_string", {"type": "string", "maxLength": 8}),
                ("one_short_field", {"type": "object",
                                     "properties": {"a": {"type": "string", "maxLength": 5}},
                                     "required": ["a"], "additionalProperties": False}),
                ("two_digits", {"type": "array", "minItems": 2, "maxItems": 2,
                                "items": {"type": "integer", "minimum": 0, "maximum": 9}}),
                ("two_words", {"type": "array", "minItems": 2, "maxItems": 2,
                               "items": {"type": "string", "maxLength": 6}})):
            response = chat(prompt, max_tokens=64,
                            response_format=json_schema_format(name, schema))
            choice = response.choices[0]
            problems = check_json_reply(choice.message.content, choice.finish_reason, schema)
            print(f"  {name}: {show(choice.message.content, 120)}, {choice.finish_reason}, "
                  f"{response.usage.completion_tokens} tokens")
            if problems:
                failures.append(f"{name} {json.dumps(schema)}: reply "
                                f"{show(choice.message.content)}\n    " + "\n    ".join(problems))
        if failures:
            self.fail("a schema that ends the reply did not:\n" + "\n".join(failures))


class VllmStructuredOutputsTest(unittest.TestCase):
    def structured(self, prompt, max_tokens=64, **kind):
        return chat(prompt, max_tokens=max_tokens,
                    extra_body={"structured_outputs": kind}).choices[0]

    def test_regex(self):
        for prompt, regex in (("Give a US phone number.", r"\(\d{3}\) \d{3}-\d{4}"),
                              ("When did World War II end? Give the date.",
                               r"[0-9]{4}-[0-9]{2}-[0-9]{2}")):
            choice = self.structured(prompt, regex=regex)
            self.assertEqual(choice.finish_reason, "stop", show(choice.message.content))
            self.assertIsNotNone(re.fullmatch(regex, choice.message.content),
                                 f"{show(choice.message.content)} does not match {regex}")
            print(f"\n  regex {regex}: {show(choice.message.content)}", end="")
        print()

    def test_choice(self):
        plain = ["yes", "no", "maybe"]
        choice = self.structured("Is the sky blue?", choice=plain)
        self.assertIn(choice.message.content, plain)
        self.assertEqual(choice.finish_reason, "stop")
        replies = [choice.message.content]
        # Choices that need escaping in a grammar's literal: quotes, backslashes.
        for odd in (['He said "hi"', "C:\\path\\to", 'both \\" here'],
                    ['He said "hi"', 'She said "bye"']):
            odd_choice = self.structured("Pick one.", choice=odd)
            self.assertIn(odd_choice.message.content, odd)
            self.assertEqual(odd_choice.finish_reason, "stop")
            replies.append(odd_choice.message.content)
        print(f"\n  choices: {', '.join(show(r) for r in replies)}")

    def test_json_as_an_object_and_as_a_string(self):
        for schema in (PET_SCHEMA, json.dumps(PET_SCHEMA)):
            choice = self.structured(PET_PROMPT, max_tokens=MAX_TOKENS, json=schema)
            self.assertEqual(check_json_reply(choice.message.content, choice.finish_reason,
                                              PET_SCHEMA), [], show(choice.message.content))
        print(f"\n  json: {show(choice.message.content, 120)}")

    def test_grammar(self):
        for prompt, grammar, regex in (
                ("What is 2 plus 3?", 'root ::= "The answer is " digit digit? "."\n'
                                      'digit ::= [0-9]\n', r"The answer is [0-9][0-9]?\."),
                ("What does a dog say?", 'root ::= animal " says " sound\n'
                                         'animal ::= "cat" | "dog"\n'
                                         'sound ::= "meow" | "woof"\n',
                 r"(cat|dog) says (meow|woof)")):
            choice = self.structured(prompt, grammar=grammar)
            self.assertEqual(choice.finish_reason, "stop", show(choice.message.content))
            self.assertIsNotNone(re.fullmatch(regex, choice.message.content),
                                 f"{show(choice.message.content)} does not match {regex}")
            print(f"\n  grammar: {show(choice.message.content)}", end="")
        print()


class LlamaCppFieldsTest(unittest.TestCase):
    def test_json_schema(self):
        choice = chat(PET_PROMPT, extra_body={"json_schema": PET_SCHEMA}).choices[0]
        self.assertEqual(check_json_reply(choice.message.content, choice.finish_reason,
                                          PET_SCHEMA), [], show(choice.message.content))
        print(f"\n  json_schema: {show(choice.message.content, 120)}")

    def test_grammar(self):
        grammar = 'root ::= "Answer: " ("yes" | "no") "."\n'
        choice = chat("Is water wet?", max_tokens=32, extra_body={"grammar": grammar}).choices[0]
        self.assertEqual(choice.finish_reason, "stop", show(choice.message.content))
        self.assertIn(choice.message.content, ("Answer: yes.", "Answer: no."))
        print(f"\n  grammar: {show(choice.message.content)}")


class ErrorTest(unittest.TestCase):
    def assert_refused(self, params: Dict, param_prefix: str, *words: str):
        """A request with `params` (beside the prompt) gets a 400 whose param
        starts with `param_prefix` and whose message holds each of `words`."""
        import openai
        response_format = params.pop("response_format", None)
        fields = {"response_format": response_format} if response_format is not None else {}
        with self.assertRaises(openai.BadRequestError, msg=f"{params} {fields}") as raised:
            chat("Hi", max_tokens=8, extra_body=params or None, **fields)
        self.assertEqual(raised.exception.status_code, 400)
        body = raised.exception.body
        body = body.get("error", body) if isinstance(body, dict) else {}
        message = body.get("message") or ""
        self.assertEqual(body.get("type"), "invalid_request_error", body)
        self.assertTrue(str(body.get("param") or "").startswith(param_prefix), body)
        for word in words:
            self.assertIn(word.lower(), message.lower(), f"the message {message!r} lacks {word!r}")
        print(f"\n  {body.get('param')}: {message}", end="")

    def test_bad_constraints_get_400_and_the_server_keeps_serving(self):
        self.assert_refused(
            {"response_format": json_schema_format("bad", {"type": "no-such-type"})},
            "response_format", "no-such-type")
        self.assert_refused(
            {"response_format": json_schema_format(
                "dangling", {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}},
                             "required": ["a"]})},
            "response_format", "missing")
        self.assert_refused({"response_format": {"type": "json_schema"}},
                            "response_format", "json_schema")
        self.assert_refused({"response_format": {"type": "xml"}}, "response_format", "xml")
        self.assert_refused({"structured_outputs": {"regex": "(ab"}}, "structured_outputs",
                            "regex", "parenthesis")
        self.assert_refused({"structured_outputs": {"grammar": 'start ::= "a"\n'}},
                            "structured_outputs", "root")
        self.assert_refused({"structured_outputs": {"choice": []}}, "structured_outputs",
                            "choice", "empty")
        self.assert_refused({"structured_outputs": {"regex": "a+", "choice": ["a"]}},
                            "structured_outputs", "regex", "choice")
        self.assert_refused({"structured_outputs": {"json": "{not json"}}, "structured_outputs",
                            "json")
        self.assert_refused({"grammar": "root ::= ("}, "grammar")
        self.assert_refused({"json_schema": {"type": "no-such-type"}}, "json_schema",
                            "no-such-type")
        print()
        self.assertTrue(server.alive())
        choice = chat(PET_PROMPT, response_format=json_schema_format("pet", PET_SCHEMA)).choices[0]
        self.assertEqual(check_json_reply(choice.message.content, choice.finish_reason,
                                          PET_SCHEMA), [], show(choice.message.content))
        self.assertTrue(chat("Hi", max_tokens=4).choices[0].message.content)


if __name__ == "__main__":
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        serve_harness.skip("needs the jsonschema package (scripts/setup.sh installs it)")
    serve_harness.main()
