"""kvjit serve's chat page at /: its HTTP side (headers, gzip, ETag,
--no_webui) with raw HTTP, and the page itself in headless Chromium driven
by Selenium: it loads with no console errors and no request to another
host, streams a reply equal to the API's at temperature 0, runs none of
the markup it shows, stops a reply (the server cancels it and frees its KV
blocks), asks for an API key, shows server errors, and fits a phone's
width. Stopping uses SmolLM2 (--stop_model), whose reply to a story prompt
at temperature 0 runs for minutes; stories260K finishes any reply within a
second, before a click can land.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
import time
import unittest

import serve_harness
from serve_harness import Server

MODEL_NAME = "stories260K"
STOP_PROMPT = "Write a long story about a dragon who learns to fly."
WAIT_S = 30

server: Server
stop_model_path = ""


def browser_paths():
    """(chromium, chromedriver), or skips: scripts/setup.sh installs both."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        serve_harness.skip(f"needs the selenium package for {sys.executable} "
                           "(scripts/setup.sh installs it)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        serve_harness.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh "
                           "installs them)")
    return chromium, driver


class Browser:
    """Headless Chromium with its console and network logged."""

    def __init__(self, width=1100, height=850):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        chromium, driver = browser_paths()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-default-apps", "--disable-sync",
                         f"--window-size={width},{height}"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self.driver.set_page_load_timeout(WAIT_S)
        self.driver.set_script_timeout(WAIT_S)
        self.requested_urls = []
        self.console = []

    def close(self):
        self.driver.quit()

    def open(self, url):
        from selenium.webdriver.support.ui import WebDriverWait
        self.driver.get(url)
        WebDriverWait(self.driver, WAIT_S).until(
            lambda d: d.execute_script("return document.readyState") == "complete")

    def collect_logs(self):
        """Drains the browser's logs into requested_urls and console."""
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                self.requested_urls.append(message["params"]["request"]["url"])
        self.console.extend(self.driver.get_log("browser"))

    def console_errors(self):
        self.collect_logs()
        return [entry for entry in self.console if entry["level"] == "SEVERE"]

    def by_id(self, element_id):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.ID, element_id)

    def wait(self, condition, timeout_s=WAIT_S, message=""):
        from selenium.webdriver.support.ui import WebDriverWait
        return WebDriverWait(self.driver, timeout_s, poll_frequency=0.02).until(
            lambda d: condition(), message)

    def wait_for_model_name(self, name):
        self.wait(lambda: self.by_id("model-name").text == name,
                  message=f"the page never showed the model's name {name}")

    def set_field(self, element_id, value):
        field = self.by_id(element_id)
        field.clear()
        field.send_keys(str(value))

    def open_settings(self):
        if self.by_id("settings").get_attribute("hidden") is not None:
            self.by_id("settings-toggle").click()

    def send_message(self, text):
        """Types `text` and presses Enter; returns the reply's article."""
        from selenium.webdriver.common.keys import Keys
        before = self.replies()
        prompt = self.by_id("prompt")
        lines = text.split("\n")
        for i, line in enumerate(lines):
            prompt.send_keys(line)
            if i + 1 < len(lines):
                prompt.send_keys(Keys.SHIFT, Keys.ENTER)
        prompt.send_keys(Keys.ENTER)
        self.wait(lambda: len(self.replies()) == len(before) + 1,
                  message="sending a message made no reply")
        return self.replies()[-1]

    def replies(self):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, "article.message.assistant")

    def messages(self, kind):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, f"article.message.{kind}")

    def wait_until_ended(self, reply, timeout_s=WAIT_S):
        self.wait(lambda: reply.get_attribute("data-state") != "streaming", timeout_s,
                  "the reply never ended")
        return reply.get_attribute("data-state")

    def text_of(self, article):
        """The message's content as the page holds it (whitespace and all)."""
        return self.driver.execute_script(
            "return arguments[0].querySelector('.content').textContent", article)

    def screenshot(self, name):
        path = os.path.join(os.getcwd(), name)
        self.driver.save_screenshot(path)
        print(f"screenshot: {path}", flush=True)


def api_chat(target: Server, messages, **fields):
    status, _, body = target.post_json("/v1/chat/completions",
                                       {"messages": messages, **fields})
    if status != 200:
        raise AssertionError(f"the API answered {status}: {body}")
    return body["choices"][0]["message"]["content"]


def setUpModule():
    global server
    browser_paths()
    server = Server()


def tearDownModule():
    server.close()


class PageOverHttpTest(unittest.TestCase):
    def get(self, path, headers=None, target=None):
        return (target or server).request("GET", path, headers=headers or {})

    def test_the_page_comes_with_its_policy_and_caching_headers(self):
        status, headers, body = self.get("/")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/html; charset=utf-8")
        self.assertEqual(headers["Cache-Control"], "no-cache")
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        self.assertRegex(headers["ETag"], r'^"[0-9a-f]{32}"$')
        policy = headers["Content-Security-Policy"]
        self.assertIn("default-src 'none'", policy)
        for directive in ("script-src", "style-src", "img-src", "connect-src"):
            self.assertIn(f"{directive} 'self'", policy)
        self.assertNotIn("unsafe-inline", policy)
        self.assertNotIn("http", policy)
        self.assertIn(b'<script src="/chat.js" defer></script>', body)

    def test_every_file_the_page_names_is_served_with_its_type(self):
        _, _, page = self.get("/")
        named = re.findall(rb'(?:src|href)="([^"]+)"', page)
        self.assertTrue(named)
        types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".svg": "image/svg+xml"}
        for path in sorted(set(p.decode() for p in named)):
            self.assertTrue(path.startswith("/") and not path.startswith("//"), path)
            status, headers, body = self.get(path)
            self.assertEqual(status, 200, path)
            self.assertEqual(headers["Content-Type"], types[os.path.splitext(path)[1]], path)
            self.assertTrue(body, path)
        self.assertEqual(self.get("/index.html")[2], page)

    def test_gzip_goes_only_where_the_client_accepts_it(self):
        _, _, plain = self.get("/chat.js")
        status, headers, body = self.get("/chat.js", {"Accept-Encoding": "gzip, deflate, br"})
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Encoding"], "gzip")
        self.assertEqual(headers["Vary"], "Accept-Encoding")
        self.assertLess(len(body), len(plain))
        self.assertEqual(gzip.decompress(body), plain)
        for refusing in ("gzip;q=0", "identity", "br", "*;q=0", "gzip;q=0, *"):
            status, headers, body = self.get("/chat.js", {"Accept-Encoding": refusing})
            self.assertNotIn("Content-Encoding", headers, refusing)
            self.assertEqual(body, plain, refusing)
        status, headers, body = self.get("/chat.js", {"Accept-Encoding": "*"})
        self.assertEqual(headers.get("Content-Encoding"), "gzip")

    def test_a_matching_etag_gets_304_and_another_the_page(self):
        for encoding in ("", "gzip"):
            _, headers, _ = self.get("/", {"Accept-Encoding": encoding})
            etag = headers["ETag"]
            status, headers, body = self.get("/", {"Accept-Encoding": encoding,
                                                   "If-None-Match": etag})
            self.assertEqual(status, 304, encoding)
            self.assertEqual(body, b"")
            self.assertEqual(headers["ETag"], etag)
            status, _, body = self.get("/", {"Accept-Encoding": encoding,
                                             "If-None-Match": '"0000", W/"1111"'})
            self.assertEqual(status, 200, encoding)
            self.assertTrue(body)

    def test_a_range_header_gets_the_whole_answer(self):
        _, _, plain = self.get("/chat.js")
        for ranges in ("bytes=0-1000000", "bytes=99999999999-", "bytes=0-1,-5", "bytes=10-20"):
            status, headers, body = self.get("/chat.js", {"Range": ranges})
            self.assertEqual(status, 200, ranges)
            self.assertEqual(headers["Accept-Ranges"], "none", ranges)
            self.assertNotIn("Content-Range", headers, ranges)
            self.assertEqual(body, plain, ranges)
        status, _, body = self.get("/v1/models", {"Range": "bytes=5000-"})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["data"][0]["id"], MODEL_NAME)
        self.assertTrue(server.alive())

    def test_no_webui_answers_slash_with_404(self):
        plain = Server("--no_webui")
        try:
            for path in ("/", "/chat.js"):
                status, _, body = plain.request("GET", path)
                self.assertEqual(status, 404, path)
                self.assertIn("no route for GET", json.loads(body)["error"]["message"])
            self.assertEqual(plain.get("/v1/models")[0], 200)
        finally:
            plain.close()

    def test_the_page_needs_no_key_but_the_api_does(self):
        keyed = Server("--api_key", "secret-key")
        try:
            self.assertEqual(keyed.request("GET", "/")[0], 200)
            self.assertEqual(keyed.request("GET", "/v1/models")[0], 401)
        finally:
            keyed.close()


class PageInBrowserTest(unittest.TestCase):
    def setUp(self):
        self.browser = Browser()
        self.browser.open(server.url + "/")
        self.browser.wait_for_model_name(MODEL_NAME)

    def tearDown(self):
        self.browser.close()

    def test_it_loads_with_no_console_error_and_asks_no_other_host(self):
        browser = self.browser
        browser.open_settings()
        browser.set_field("temperature", 0)
        browser.set_field("max-tokens", 8)
        self.assertEqual(browser.wait_until_ended(browser.send_message("Hello")), "done")
        self.assertEqual(browser.console_errors(), [])
        self.assertTrue(browser.requested_urls)
        foreign = [url for url in browser.requested_urls
                   if not url.startswith(server.url + "/")]
        self.assertEqual(foreign, [])
        self.assertIn(server.url + "/v1/chat/completions", browser.requested_urls)
        self.assertEqual(browser.driver.title, f"{MODEL_NAME} · kvjit")

    def test_a_reply_streams_and_equals_the_apis_at_temperature_0(self):
        browser = self.browser
        browser.open_settings()
        browser.set_field("temperature", 0)
        browser.set_field("max-tokens", 48)
        reply = browser.send_message("Once upon a time")
        self.assertEqual(browser.wait_until_ended(reply), "done")
        expected = api_chat(server, [{"role": "user", "content": "Once upon a time"}],
                            temperature=0, max_tokens=48, top_p=0.95)
        self.assertNotIn("```", expected)
        self.assertEqual(browser.text_of(reply), expected)
        # Streamed: the page took the reply as many deltas, not one body.
        self.assertGreater(int(reply.get_attribute("data-deltas")), 10)
        stats = reply.find_element("css selector", ".stats").text
        self.assertRegex(stats, r"^\d+ prompt tokens · 48 reply tokens · first token \d+ ms · "
                                r"[\d.]+ tokens/s$")
        browser.screenshot("webui-chat.png")

    def test_the_conversation_goes_on_with_its_history_and_system_prompt(self):
        browser = self.browser
        browser.open_settings()
        browser.set_field("system-prompt", "Tell a story.")
        browser.set_field("temperature", 0)
        browser.set_field("max-tokens", 12)
        first = browser.send_message("A cat")
        browser.wait_until_ended(first)
        second = browser.send_message("A dog")
        self.assertEqual(browser.wait_until_ended(second), "done")
        history = [{"role": "system", "content": "Tell a story."},
                   {"role": "user", "content": "A cat"},
                   {"role": "assistant", "content": browser.text_of(first)},
                   {"role": "user", "content": "A dog"}]
        self.assertEqual(browser.text_of(second),
                         api_chat(server, history, temperature=0, max_tokens=12, top_p=0.95))
        browser.by_id("new-chat").click()
        self.assertEqual(browser.messages("user"), [])
        self.assertEqual(browser.replies(), [])

    def test_enter_sends_and_shift_enter_starts_a_line(self):
        from selenium.webdriver.common.keys import Keys
        browser = self.browser
        browser.open_settings()
        browser.set_field("max-tokens", 4)
        prompt = browser.by_id("prompt")
        prompt.send_keys("first line", Keys.SHIFT, Keys.ENTER, Keys.NULL, "second line")
        self.assertEqual(prompt.get_attribute("value"), "first line\nsecond line")
        self.assertEqual(browser.messages("user"), [])
        prompt.send_keys(Keys.ENTER)
        browser.wait(lambda: len(browser.messages("user")) == 1)
        self.assertEqual(browser.text_of(browser.messages("user")[0]),
                         "first line\nsecond line")
        self.assertEqual(prompt.get_attribute("value"), "")

    def test_markup_in_a_message_shows_as_text_and_runs_nothing(self):
        browser = self.browser
        browser.open_settings()
        browser.set_field("max-tokens", 4)
        attack = ('<img src=x onerror="window.injected=1"> '
                  '<script>window.injected=2</script> <b>bold</b>')
        browser.wait_until_ended(browser.send_message(attack))
        code_attack = "```html\n<img src=x onerror=\"window.injected=3\">\n```"
        browser.wait_until_ended(browser.send_message(code_attack))
        time.sleep(0.3)  # an image's error handler would have run by now
        self.assertIsNone(browser.driver.execute_script("return window.injected"))
        user = browser.messages("user")
        self.assertEqual(browser.text_of(user[0]), attack)
        from selenium.webdriver.common.by import By
        conversation = browser.by_id("conversation")
        for tag in ("img", "script", "b"):
            self.assertEqual(conversation.find_elements(By.TAG_NAME, tag), [], tag)
        code = user[1].find_element(By.CSS_SELECTOR, "figure.code pre code")
        self.assertEqual(code.get_attribute("textContent"),
                         '<img src=x onerror="window.injected=3">')
        browser.collect_logs()
        self.assertFalse([url for url in browser.requested_urls if url.endswith("/x")])

    def test_a_code_block_has_a_copy_button(self):
        browser = self.browser
        browser.driver.execute_cdp_cmd("Browser.grantPermissions", {
            "origin": server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
        browser.open_settings()
        browser.set_field("max-tokens", 4)
        source = "for (let i = 0; i < 3; ++i) {\n  console.log(i);\n}"
        browser.wait_until_ended(browser.send_message(f"Run this:\n```js\n{source}\n```"))
        from selenium.webdriver.common.by import By
        block = browser.messages("user")[0].find_element(By.CSS_SELECTOR, "figure.code")
        self.assertEqual(block.find_element(By.CSS_SELECTOR, ".code-head span").text, "js")
        self.assertEqual(block.find_element(By.CSS_SELECTOR, "code").get_attribute("textContent"),
                         source)
        copy = block.find_element(By.CSS_SELECTOR, "button.copy")
        copy.click()
        browser.wait(lambda: copy.text != "Copy", message="the copy button did nothing")
        self.assertEqual(copy.text, "Copied")
        pasted = browser.driver.execute_async_script(
            "navigator.clipboard.readText().then(arguments[0], e => arguments[0]('error ' + e))")
        self.assertEqual(pasted, source)

    def test_settings_are_kept_across_reloads(self):
        browser = self.browser
        browser.open_settings()
        values = {"system-prompt": "Be brief.", "temperature": "0.3", "top-p": "0.8",
                  "max-tokens": "77", "seed": "1234"}
        for field, value in values.items():
            browser.set_field(field, value)
        browser.open(server.url + "/")
        browser.wait_for_model_name(MODEL_NAME)
        for field, value in values.items():
            self.assertEqual(browser.by_id(field).get_attribute("value"), value, field)
        browser.open_settings()
        browser.by_id("reset-settings").click()
        self.assertEqual(browser.by_id("temperature").get_attribute("value"), "0.7")
        self.assertEqual(browser.by_id("seed").get_attribute("value"), "")

    def test_a_request_the_server_refuses_shows_its_error(self):
        browser = self.browser
        browser.open_settings()
        browser.set_field("max-tokens", -5)
        reply = browser.send_message("Hello")
        self.assertEqual(browser.wait_until_ended(reply), "error")
        errors = browser.messages("error")
        self.assertEqual(len(errors), 1)
        self.assertRegex(browser.text_of(errors[0]), r"^400: .*max_tokens")
        self.assertIn("unanswered", browser.messages("user")[0].get_attribute("class"))
        # The refused turn left the history: the next one is answered.
        browser.set_field("max-tokens", 4)
        self.assertEqual(browser.wait_until_ended(browser.send_message("Hello")), "done")

    def test_a_phone_wide_page_does_not_scroll_sideways(self):
        browser = self.browser
        browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True})
        browser.open(server.url + "/")
        browser.wait_for_model_name(MODEL_NAME)
        browser.open_settings()
        browser.set_field("max-tokens", 24)
        long_word = "x" * 300
        long_code = "```\n" + "y" * 300 + "\n```"
        browser.wait_until_ended(browser.send_message(long_word))
        browser.wait_until_ended(browser.send_message(long_code))
        widths = browser.driver.execute_script(
            "return [window.innerWidth, document.documentElement.scrollWidth,"
            " document.body.scrollWidth,"
            " document.getElementById('conversation').scrollWidth,"
            " document.getElementById('conversation').clientWidth]")
        self.assertEqual(widths[0], 390)
        self.assertLessEqual(widths[1], widths[0], widths)
        self.assertLessEqual(widths[2], widths[0], widths)
        self.assertLessEqual(widths[3], widths[4], widths)
        browser.screenshot("webui-phone.png")


class ApiKeyInBrowserTest(unittest.TestCase):
    def test_the_page_asks_for_the_key_once_and_sends_it(self):
        keyed = Server("--api_key", "secret-key")
        browser = Browser()
        try:
            browser.open(keyed.url + "/")
            panel = browser.by_id("api-key-panel")
            browser.wait(lambda: panel.is_displayed(), message="the page never asked for a key")
            browser.by_id("api-key").send_keys("wrong-key\n")
            browser.wait(lambda: browser.by_id("api-key-error").text != "",
                         message="a wrong key was taken")
            browser.by_id("api-key").send_keys("secret-key\n")
            browser.wait_for_model_name(MODEL_NAME)
            self.assertFalse(panel.is_displayed())
            browser.open_settings()
            browser.set_field("max-tokens", 4)
            self.assertEqual(browser.wait_until_ended(browser.send_message("Hi")), "done")
            # Kept: a reload does not ask again.
            browser.open(keyed.url + "/")
            browser.wait_for_model_name(MODEL_NAME)
            self.assertFalse(browser.by_id("api-key-panel").is_displayed())
        finally:
            browser.close()
            keyed.close()


class LostServerInBrowserTest(unittest.TestCase):
    def test_a_server_that_went_away_is_reported(self):
        lost = Server()
        browser = Browser()
        try:
            browser.open(lost.url + "/")
            browser.wait_for_model_name(MODEL_NAME)
            lost.close()
            reply = browser.send_message("Hello")
            self.assertEqual(browser.wait_until_ended(reply), "error")
            errors = browser.messages("error")
            self.assertIn("the connection to the server was lost", browser.text_of(errors[-1]))
            self.assertFalse(browser.by_id("send").get_attribute("hidden"))
        finally:
            browser.close()
            lost.close()


class StopInBrowserTest(unittest.TestCase):
    def test_stop_ends_the_reply_and_the_server_frees_its_blocks(self):
        serve_harness.MODEL, saved = stop_model_path, serve_harness.MODEL
        try:
            smol = Server()
        finally:
            serve_harness.MODEL = saved
        browser = Browser()
        try:
            before = smol.metrics()
            browser.open(smol.url + "/")
            browser.wait_for_model_name(os.path.splitext(os.path.basename(stop_model_path))[0])
            browser.open_settings()
            browser.set_field("temperature", 0)
            reply = browser.send_message(STOP_PROMPT)
            browser.wait(lambda: int(reply.get_attribute("data-deltas") or 0) >= 8,
                         message="no reply came")
            running = smol.metrics()
            self.assertEqual(running["kvjit_num_requests_running"], 1)
            self.assertGreater(running["kvjit_kv_blocks_used"], 0)
            self.assertTrue(browser.by_id("stop").is_displayed())
            browser.by_id("stop").click()
            self.assertEqual(browser.wait_until_ended(reply), "stopped")
            self.assertTrue(reply.find_element("css selector", ".stats").text.startswith("stopped"))
            self.assertTrue(browser.by_id("send").is_displayed())
            self.assertEqual(smol.wait_for_metric("kvjit_num_requests_running", lambda v: v == 0),
                             0)
            self.assertEqual(smol.wait_for_metric("kvjit_kv_blocks_used", lambda v: v == 0), 0)
            after = smol.metrics()
            self.assertEqual(after["kvjit_requests_cancelled_total"],
                             before["kvjit_requests_cancelled_total"] + 1)
            self.assertEqual(after["kvjit_requests_finished_total"],
                             before["kvjit_requests_finished_total"])
            browser.screenshot("webui-stopped.png")
            self.assertEqual(browser.console_errors(), [])
        finally:
            browser.close()
            smol.close()


def main():
    global stop_model_path
    # --stop_model NAME: a model tools/scripts/fetch_model.sh fetched.
    if "--stop_model" in sys.argv:
        at = sys.argv.index("--stop_model")
        name = sys.argv[at + 1]
        del sys.argv[at:at + 2]
        directory = os.environ.get("KVJIT_MODEL_DIR") or os.path.expanduser("~/.cache/kvjit/models")
        stop_model_path = os.path.join(directory, name)
        if not os.path.isfile(stop_model_path):
            serve_harness.skip(f"needs the model {stop_model_path} "
                               "(tools/scripts/fetch_model.sh fetches it)")
    else:
        sys.exit("webui_test.py: --stop_model is required")
    serve_harness.main(needs_openai=False)


if __name__ == "__main__":
    main()
