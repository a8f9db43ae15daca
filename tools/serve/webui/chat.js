// kvjit serve's chat page: a conversation with the server's model over its
// own /v1/chat/completions stream. Text from the user and the model is only
// ever inserted as text (textContent), never parsed as HTML.
"use strict";

(() => {
  const SETTINGS_KEY = "kvjit.chat.settings";
  const API_KEY_KEY = "kvjit.chat.apiKey";
  const DEFAULTS = Object.freeze({
    system: "", temperature: 0.7, top_p: 0.95, max_tokens: "", seed: "",
  });

  const $ = (id) => document.getElementById(id);
  const ui = {
    modelName: $("model-name"),
    newChat: $("new-chat"),
    settingsToggle: $("settings-toggle"),
    settings: $("settings"),
    system: $("system-prompt"),
    temperature: $("temperature"),
    topP: $("top-p"),
    maxTokens: $("max-tokens"),
    seed: $("seed"),
    resetSettings: $("reset-settings"),
    keyPanel: $("api-key-panel"),
    key: $("api-key"),
    keyError: $("api-key-error"),
    conversation: $("conversation"),
    emptyHint: $("empty-hint"),
    prompt: $("prompt"),
    send: $("send"),
    stop: $("stop"),
  };

  const state = {
    model: "",
    messages: [],  // the conversation as the API takes it, system prompt aside
    stream: null,  // the AbortController of the reply under way
    apiKey: readStorage(API_KEY_KEY) || "",
  };

  // --- storage -------------------------------------------------------------

  function readStorage(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (error) {  // storage turned off: settings last the page's life
      return null;
    }
  }

  function writeStorage(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(key);
      else window.localStorage.setItem(key, value);
    } catch (error) {
      // As above.
    }
  }

  function loadSettings() {
    let saved = {};
    try {
      saved = JSON.parse(readStorage(SETTINGS_KEY) || "{}") || {};
    } catch (error) {
      saved = {};
    }
    const settings = { ...DEFAULTS, ...saved };
    ui.system.value = settings.system;
    ui.temperature.value = settings.temperature;
    ui.topP.value = settings.top_p;
    ui.maxTokens.value = settings.max_tokens;
    ui.seed.value = settings.seed;
  }

  function saveSettings() {
    writeStorage(SETTINGS_KEY, JSON.stringify({
      system: ui.system.value,
      temperature: ui.temperature.value,
      top_p: ui.topP.value,
      max_tokens: ui.maxTokens.value,
      seed: ui.seed.value,
    }));
  }

  // A number field's value, or undefined when it is empty; a value that is
  // not a number is left to the server, whose 400 names the field.
  function numberField(input) {
    const text = input.value.trim();
    if (text === "") return undefined;
    const value = Number(text);
    return Number.isFinite(value) ? value : text;
  }

  // --- the server ----------------------------------------------------------

  function authHeaders() {
    return state.apiKey ? { Authorization: `Bearer ${state.apiKey}` } : {};
  }

  // An error the server answered with: its status and OpenAI error message.
  class ServerError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function serverError(response) {
    let message = response.statusText || "no message";
    try {
      const body = await response.text();
      try {
        const parsed = JSON.parse(body);
        if (parsed && parsed.error && parsed.error.message) message = parsed.error.message;
        else if (body) message = body;
      } catch (error) {
        if (body) message = body;
      }
    } catch (error) {
      // The body was lost with the connection: the status says enough.
    }
    return new ServerError(response.status, `${response.status}: ${message}`);
  }

  async function loadModel() {
    let response;
    try {
      response = await fetch("/v1/models", { headers: authHeaders(), cache: "no-store" });
    } catch (error) {
      showError(`cannot reach the server: ${error.message}`);
      return;
    }
    if (response.status === 401) {
      askForKey(state.apiKey ? "the server refused this key" : "");
      return;
    }
    if (!response.ok) {
      showError(`/v1/models: ${(await serverError(response)).message}`);
      return;
    }
    let body;
    try {
      body = await response.json();
    } catch (error) {
      showError(`/v1/models: the answer could not be read (${error.message})`);
      return;
    }
    const model = body && body.data && body.data[0];
    if (!model) {
      showError("the server lists no model");
      return;
    }
    state.model = model.id;
    ui.modelName.textContent = model.id;
    ui.modelName.title = `${model.id}, context ${model.max_model_len} tokens`;
    document.title = `${model.id} · kvjit`;
  }

  function askForKey(reason) {
    ui.keyPanel.hidden = false;
    ui.keyError.textContent = reason || "";
    ui.key.value = "";
    ui.key.focus();
  }

  function saveKey() {
    const key = ui.key.value.trim();
    if (!key) {
      ui.keyError.textContent = "enter the key";
      return;
    }
    state.apiKey = key;
    writeStorage(API_KEY_KEY, key);
    ui.keyPanel.hidden = true;
    loadModel();
  }

  // The data of each server-sent event of a response body, as it comes.
  async function* serverSentEvents(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      const events = buffer.split(/\r?\n\r?\n/);
      buffer = done ? "" : events.pop();
      for (const event of events) {
        const data = event.split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
        if (data.length) yield data.join("\n");
      }
      if (done) return;
    }
  }

  // --- rendering -----------------------------------------------------------

  // Text and ``` fenced code blocks; a fence still open (mid-stream) runs to
  // the end.
  function splitFences(text) {
    const segments = [];
    let current = { code: false, lines: [] };
    for (const line of text.split("\n")) {
      const fence = /^\s*```\s*([^`\s]*)\s*$/.exec(line);
      if (fence && !current.code) {
        segments.push(current);
        current = { code: true, language: fence[1], lines: [] };
      } else if (fence && current.code && fence[1] === "") {
        segments.push(current);
        current = { code: false, lines: [] };
      } else {
        current.lines.push(line);
      }
    }
    segments.push(current);
    return segments
      .map((segment) => ({ ...segment, text: segment.lines.join("\n") }))
      .filter((segment) => segment.code || segment.text.trim() !== "");
  }

  function copyText(text, button) {
    const done = (label) => {
      button.textContent = label;
      setTimeout(() => { button.textContent = "Copy"; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(() => done("Copied"), () => done("Copy failed"));
      return;
    }
    const scratch = document.createElement("textarea");
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.style.position = "fixed";
    scratch.style.opacity = "0";
    document.body.append(scratch);
    scratch.select();
    const copied = document.execCommand("copy");
    scratch.remove();
    done(copied ? "Copied" : "Copy failed");
  }

  function codeBlock(segment) {
    const figure = document.createElement("figure");
    figure.className = "code";
    const head = document.createElement("div");
    head.className = "code-head";
    const language = document.createElement("span");
    language.textContent = segment.language || "code";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy";
    copy.textContent = "Copy";
    copy.addEventListener("click", () => copyText(segment.text, copy));
    head.append(language, copy);
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    code.textContent = segment.text;
    pre.append(code);
    figure.append(head, pre);
    return figure;
  }

  function renderContent(element, text) {
    const nodes = splitFences(text).map((segment) => {
      if (segment.code) return codeBlock(segment);
      const div = document.createElement("div");
      div.className = "text";
      div.textContent = segment.text;
      return div;
    });
    element.replaceChildren(...nodes);
  }

  function nearBottom() {
    const c = ui.conversation;
    return c.scrollHeight - c.scrollTop - c.clientHeight < 48;
  }

  function scrollToBottom() {
    ui.conversation.scrollTop = ui.conversation.scrollHeight;
  }

  function appendMessage(kind, label, text) {
    ui.emptyHint.hidden = true;
    const stick = nearBottom();
    const article = document.createElement("article");
    article.className = `message ${kind}`;
    const role = document.createElement("div");
    role.className = "role";
    role.textContent = label;
    const content = document.createElement("div");
    content.className = "content";
    const stats = document.createElement("div");
    stats.className = "stats";
    article.append(role, content, stats);
    ui.conversation.append(article);
    renderContent(content, text);
    if (stick) scrollToBottom();
    return { article, content, stats };
  }

  function showError(message) {
    appendMessage("error", "Error", message).article.dataset.state = "error";
  }

  function formatStats(usage, timings, measured) {
    const parts = [];
    if (usage) {
      parts.push(`${usage.prompt_tokens} prompt tokens`, `${usage.completion_tokens} reply tokens`);
    }
    const ttft = timings ? timings.prompt_ms : measured.ttftMs;
    if (ttft !== undefined && ttft !== null) parts.push(`first token ${Math.round(ttft)} ms`);
    const rate = timings ? timings.predicted_per_second : measured.tokensPerSecond;
    if (rate) parts.push(`${rate.toFixed(1)} tokens/s`);
    return parts.join(" · ");
  }

  // --- a turn --------------------------------------------------------------

  function setBusy(busy) {
    ui.send.hidden = busy;
    ui.stop.hidden = !busy;
    ui.stop.disabled = !busy;
  }

  function requestBody() {
    const messages = [];
    const system = ui.system.value.trim();
    if (system) messages.push({ role: "system", content: ui.system.value });
    messages.push(...state.messages);
    const body = {
      model: state.model || undefined,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: numberField(ui.temperature),
      top_p: numberField(ui.topP),
      max_tokens: numberField(ui.maxTokens),
      seed: numberField(ui.seed),
    };
    return JSON.stringify(body);  // drops the fields left undefined
  }

  async function send() {
    const text = ui.prompt.value;
    if (!text.trim() || state.stream) return;
    // New chat replaces state.messages: this turn ends in the array it began in.
    const history = state.messages;
    const user = appendMessage("user", "You", text);
    history.push({ role: "user", content: text });
    ui.prompt.value = "";
    fitPrompt();

    const reply = appendMessage("assistant", state.model || "Model", "");
    reply.article.classList.add("streaming");
    reply.article.dataset.state = "streaming";
    reply.article.dataset.deltas = "0";
    const controller = new AbortController();
    state.stream = controller;
    setBusy(true);

    const started = performance.now();
    let firstTokenAt = null;
    let lastTokenAt = null;
    let replyText = "";
    let deltas = 0;
    let usage = null;
    let timings = null;
    let renderQueued = false;
    const render = () => {
      renderQueued = false;
      const stick = nearBottom();
      renderContent(reply.content, replyText);
      if (stick) scrollToBottom();
    };

    try {
      const response = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json", ...authHeaders() },
        body: requestBody(),
        signal: controller.signal,
      });
      if (!response.ok) throw await serverError(response);
      let ended = false;
      for await (const data of serverSentEvents(response.body)) {
        if (data === "[DONE]") {
          ended = true;
          break;
        }
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ServerError(0, chunk.error.message || "the server failed");
        if (chunk.usage) usage = chunk.usage;
        if (chunk.timings) timings = chunk.timings;
        for (const choice of chunk.choices || []) {
          const piece = choice.delta && choice.delta.content;
          if (!piece) continue;
          const now = performance.now();
          if (firstTokenAt === null) firstTokenAt = now;
          lastTokenAt = now;
          replyText += piece;
          deltas += 1;
          reply.article.dataset.deltas = String(deltas);
          if (!renderQueued) {
            renderQueued = true;
            requestAnimationFrame(render);
          }
        }
      }
      if (!ended) throw new Error("the stream ended before the reply did");
      history.push({ role: "assistant", content: replyText });
      reply.article.dataset.state = "done";
    } catch (error) {
      if (controller.signal.aborted) {
        reply.article.dataset.state = "stopped";
        if (replyText) {
          history.push({ role: "assistant", content: replyText });
        } else {
          // Stopped before any text: the model never answered this turn.
          history.pop();
          user.article.classList.add("unanswered");
        }
      } else {
        // The turn failed: it leaves the history, so that the next message
        // does not follow an unanswered one.
        history.pop();
        user.article.classList.add("unanswered");
        reply.article.dataset.state = "error";
        if (error instanceof ServerError && error.status === 401) {
          askForKey("the server refused the key");
        }
        const message = error instanceof ServerError
          ? error.message
          : `the connection to the server was lost (${error.message})`;
        showError(message);
      }
    } finally {
      state.stream = null;
      setBusy(false);
      render();
      reply.article.classList.remove("streaming");
      const measured = {
        ttftMs: firstTokenAt === null ? null : firstTokenAt - started,
        tokensPerSecond: deltas > 1 && lastTokenAt > firstTokenAt
          ? (deltas - 1) * 1000 / (lastTokenAt - firstTokenAt) : null,
      };
      let stats = formatStats(usage, timings, measured);
      if (reply.article.dataset.state === "stopped") stats = stats ? `stopped · ${stats}` : "stopped";
      reply.stats.textContent = stats;
      if (!timings && stats) reply.stats.title = "measured in the browser";
      ui.prompt.focus();
    }
  }

  function stop() {
    if (state.stream) state.stream.abort();
  }

  function newChat() {
    stop();
    state.messages = [];
    ui.conversation.replaceChildren(ui.emptyHint);
    ui.emptyHint.hidden = false;
    ui.prompt.focus();
  }

  // The message box grows with its text, up to the CSS's max-height.
  function fitPrompt() {
    ui.prompt.style.height = "auto";
    ui.prompt.style.height = `${ui.prompt.scrollHeight + 2}px`;
  }

  // --- wiring --------------------------------------------------------------

  ui.prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  ui.prompt.addEventListener("input", fitPrompt);
  ui.send.addEventListener("click", send);
  ui.stop.addEventListener("click", stop);
  ui.newChat.addEventListener("click", newChat);
  ui.settingsToggle.addEventListener("click", () => {
    ui.settings.hidden = !ui.settings.hidden;
    ui.settingsToggle.setAttribute("aria-expanded", String(!ui.settings.hidden));
  });
  for (const input of [ui.system, ui.temperature, ui.topP, ui.maxTokens, ui.seed]) {
    input.addEventListener("input", saveSettings);
  }
  ui.resetSettings.addEventListener("click", () => {
    writeStorage(SETTINGS_KEY, null);
    loadSettings();
  });
  // The key's form never submits (the page's policy allows no form target).
  ui.keyPanel.addEventListener("submit", (event) => {
    event.preventDefault();
    saveKey();
  });

  loadSettings();
  setBusy(false);
  loadModel();
  ui.prompt.focus();
})();
