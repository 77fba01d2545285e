// The message list: rows keyed by message id, streamed text shown as the server renders it
// (below), the server's sanitized HTML once a message is final (code blocks get a copy button),
// tool cards grouped per step, and the actions under each row (copy, edit and resend, regenerate).
//
// While an answer streams, its text arrives at once (text_delta) and its HTML a moment later
// (text_html, docs/protocol.md): the body holds the settled HTML (appended, never touched
// again), then the open block's HTML (replaced by each frame), then the text not yet rendered,
// as text at the end of that block. The final HTML replaces only what differs from what is
// shown, so the answer does not jump when it ends.
//
// One answer per turn: a turn stores one assistant message per model step, and the steps that
// follow each other read as one answer (`regroup`): the header on the first, the steps' text and
// tool cards in order, the actions (copy takes the whole answer) and the usage (summed) once, on
// the last.
//
// Thinking (a model's reasoning, `reasoning` and `reasoning_delta` frames) is shown above the
// answer in a folded <details> "Thinking" section, as plain text, apart from the answer: copy
// takes the answer only.
//
// Sizes (docs/protocol.md): a message or tool call too large for a frame arrives as a summary
// marked `large`, and its whole object is read over HTTP (at most two reads at once); the
// history frame holds only the newest messages, and older ones are read page by page when the
// person scrolls up to them (or presses "Show earlier messages").
//
// Safety: the only HTML inserted is a message's "html" field, rendered from Markdown and
// sanitized by the server (boocode/chat/wire/rendering.py). Everything else goes in as text.

import { copyButton, el, formatCount, getJSON, iconButton, markScrollable } from "./dom.js";
import { showAttachments } from "./resources.js";
import { removeView, showView } from "./appviews.js";
import { renderCall } from "./toolcards.js";

const ROLE_LABELS = { user: "You", assistant: "Assistant", console: "Console", notice: "Notice" };
const NEAR_BOTTOM = 80;
const WHOLE_READS = 2; // large objects read at once

// Reads whole objects over HTTP, a few at a time, once per URL while one is pending.
class WholeReads {
  constructor() {
    this.queue = [];
    this.pending = new Set();
    this.active = 0;
  }

  read(url, done, failed) {
    if (this.pending.has(url)) return;
    this.pending.add(url);
    this.queue.push({ url, done, failed });
    this.next();
  }

  next() {
    while (this.active < WHOLE_READS && this.queue.length) {
      const { url, done, failed } = this.queue.shift();
      this.active += 1;
      getJSON(url)
        .then(done, failed)
        .finally(() => {
          this.active -= 1;
          this.pending.delete(url);
          this.next();
        });
    }
  }
}

export class Thread {
  constructor(container, { urls, welcome, onEdit, onRegenerate, onScrollState, editAttachments }) {
    this.container = container;
    this.urls = urls;
    this.welcome = welcome;
    this.onEdit = onEdit;
    this.editAttachments = editAttachments; // resources.js: the edited message's attachment chips
    this.onRegenerate = onRegenerate;
    this.onScrollState = onScrollState || (() => {});
    this.messages = new Map(); // id -> entry
    this.held = null; // the row of a message waiting for the connection (hold)
    this.calls = new Map(); // id -> card element
    this.running = false;
    this.wholeReads = new WholeReads();
    this.earlier = el("button", "secondary show-earlier", "Show earlier messages");
    this.earlier.type = "button";
    this.earlier.hidden = true;
    this.earlier.addEventListener("click", () => this.loadEarlier());
    this.loadingEarlier = false;
    // Scrolling up to the button reads the next page by itself.
    if ("IntersectionObserver" in window) {
      new IntersectionObserver((seen) => {
        if (seen.some((item) => item.isIntersecting) && !this.earlier.hidden) this.loadEarlier();
      }, { root: container, rootMargin: "200px 0px 0px 0px" }).observe(this.earlier);
    }
    container.addEventListener("scroll", () => this.onScrollState(this.nearBottom()), { passive: true });
  }

  // --- older messages (the history frame's `more`) -------------------------------------------
  setMore(more) {
    this.earlier.hidden = !more;
    this.earlier.disabled = false;
    this.earlier.textContent = "Show earlier messages";
    if (more && this.earlier.parentNode !== this.container) this.container.prepend(this.earlier);
  }

  async loadEarlier() {
    if (this.loadingEarlier || this.earlier.hidden || this.isEmpty) return;
    this.loadingEarlier = true;
    this.earlier.disabled = true;
    this.earlier.textContent = "Loading earlier messages…";
    const first = Math.min(...this.messages.keys());
    try {
      const page = await getJSON(this.urls.earlier(first));
      // Keep what the person looks at in place while rows are added above it.
      const fromEnd = this.container.scrollHeight - this.container.scrollTop;
      for (const message of page.messages || []) {
        if (!this.messages.has(message.id)) this.upsert(message, { scroll: false });
      }
      this.container.scrollTop = this.container.scrollHeight - fromEnd;
      this.setMore(Boolean(page.more));
    } catch (error) {
      this.earlier.disabled = false;
      this.earlier.textContent = `Could not load earlier messages (${error.message}): try again`;
    } finally {
      this.loadingEarlier = false;
    }
  }

  // --- scrolling ---------------------------------------------------------------------------
  nearBottom() {
    const box = this.container;
    return box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_BOTTOM;
  }

  scrollToEnd() {
    this.container.scrollTop = this.container.scrollHeight;
    this.onScrollState(true);
  }

  keepScrolled(wasNearBottom) {
    if (wasNearBottom) this.container.scrollTop = this.container.scrollHeight;
    this.onScrollState(this.nearBottom());
  }

  // --- the whole list ----------------------------------------------------------------------
  clear() {
    this.messages.clear();
    this.calls.clear();
    this.container.replaceChildren(...(this.held ? [this.held] : [])); // (it waits on: see hold)
    this.setMore(false);
    this.updateWelcome();
  }

  get isEmpty() {
    return this.messages.size === 0;
  }

  updateWelcome() {
    if (!this.welcome) return;
    const empty = this.isEmpty && !this.held;
    if (empty && !this.welcome.isConnected) this.container.prepend(this.welcome);
    else if (!empty && this.welcome.isConnected) this.welcome.remove();
  }

  insertInOrder(article, id) {
    // Messages arrive in order, except after a reconnect when history and live frames overlap.
    for (const other of this.container.children) {
      if (other.classList.contains("message") && Number(other.dataset.id) > id) {
        this.container.insertBefore(article, other);
        return;
      }
    }
    const held = this.held && this.held.parentNode === this.container ? this.held : null;
    this.container.insertBefore(article, held); // (null: at the end)
  }

  // --- a message waiting for the connection --------------------------------------------------
  // A message typed while the socket is down (chat.js holds it) shows in place at the end of the
  // list, as text, marked as waiting, until the stored message takes its place or it goes back
  // into the composer (unhold). It is no message of the list: it has no id and no actions.
  hold(text) {
    this.unhold();
    const row = el("article", "held-message");
    row.setAttribute("aria-label", "Your message, not sent yet");
    const note = el("p", "held-note");
    note.append(el("span", "held-badge", "waiting"), "— sent when the connection is back");
    row.append(el("div", "message-body plain", text), note);
    this.held = row;
    this.container.append(row);
    this.updateWelcome();
    this.scrollToEnd();
  }

  // The held message is sent (it says so until its stored message arrives) or goes back.
  heldSending() {
    if (!this.held) return;
    const note = this.held.querySelector(".held-note");
    note.replaceChildren(el("span", "held-badge", "sending"));
  }

  unhold() {
    if (!this.held) return;
    this.held.remove();
    this.held = null;
    this.updateWelcome();
  }

  remove(ids) {
    for (const id of ids) {
      const entry = this.messages.get(id);
      if (!entry) continue;
      const leaving = [];
      for (const card of entry.calls.querySelectorAll(".tool-card")) {
        this.calls.delete(Number(card.dataset.id));
        leaving.push(removeView(Number(card.dataset.id)));
      }
      const [before, after] = [neighbour(entry.el, -1), neighbour(entry.el, 1)];
      // Views are told they go before their frames are (appviews.js): until then the message is
      // hidden and no longer counts as one.
      entry.el.classList.remove("message");
      entry.el.hidden = true;
      Promise.all(leaving).finally(() => entry.el.remove());
      this.messages.delete(id);
      for (const node of [before, after]) if (node) this.regroup(node);
    }
    this.updateWelcome();
    this.refreshActions();
  }

  // The answer `article` belongs to (assistant messages side by side) marked as one: the header
  // shows on its first step, the footer on its last, whose footer speaks for them all.
  regroup(article) {
    const steps = [];
    for (let node = article; node && isAnswerStep(node); node = neighbour(node, -1)) steps.unshift(node);
    for (let node = neighbour(article, 1); node && isAnswerStep(node); node = neighbour(node, 1)) steps.push(node);
    steps.forEach((node, index) => {
      node.classList.toggle("continued", index > 0);
      node.classList.toggle("continues", index < steps.length - 1);
    });
    const entries = steps.map((node) => this.messages.get(Number(node.dataset.id))).filter(Boolean);
    if (!entries.length) return;
    const last = entries[entries.length - 1];
    this.renderFooter(last, entries);
    // The answer's header says how its latest step stands (streaming, failed, stopped).
    const status = last.message.status;
    entries[0].badge.textContent = status === "complete" ? "" : status;
  }

  // --- one message -------------------------------------------------------------------------
  entryFor(message) {
    let entry = this.messages.get(message.id);
    if (entry) return entry;
    const article = el("article", "message");
    article.dataset.id = message.id;
    const header = el("header", "message-header");
    const role = el("span", "role", ROLE_LABELS[message.role] || message.role);
    const badge = el("span", "badge");
    const model = el("span", "model-name");
    header.append(role, badge, model);
    const thinking = el("details", "thinking");
    thinking.hidden = true;
    const summary = el("summary", "thinking-summary", "Thinking");
    const thought = el("div", "thinking-text");
    thinking.append(summary, thought);
    const body = el("div", "message-body");
    const calls = el("div", "tool-calls");
    const error = el("p", "message-error");
    error.hidden = true;
    const note = el("p", "message-note");
    note.hidden = true;
    const footer = el("div", "message-footer");
    article.append(header, thinking, body, note, calls, error, footer);
    entry = {
      el: article, header, badge, model, thinking, summary, thought, body, note, calls, error, footer,
      textNode: null, live: null, length: 0, message,
    };
    this.messages.set(message.id, entry);
    this.insertInOrder(article, message.id);
    this.updateWelcome();
    return entry;
  }

  upsert(message, { scroll = true } = {}) {
    const wasNearBottom = this.nearBottom();
    const entry = this.entryFor(message);
    if (entry.editing) {
      entry.message = { ...entry.message, ...message };
      return;
    }
    entry.message = message;
    const article = entry.el;
    article.className = `message role-${message.role} status-${message.status}`;
    article.setAttribute("aria-busy", String(message.status === "streaming"));
    entry.badge.textContent = message.status === "complete" ? "" : message.status;
    entry.model.textContent = message.role === "assistant" && message.model ? `· ${message.model}` : "";
    this.renderThinking(entry, message);
    this.renderBody(entry, message);
    showAttachments(entry.el, entry.body, message); // resources.js: chips that open the viewer
    entry.error.textContent = message.error || "";
    entry.error.hidden = !message.error;
    for (const call of message.tool_calls || []) this.upsertCall(call, false);
    this.renderFooter(entry);
    this.regroup(entry.el);
    for (const side of [-1, 1]) { // a message between two steps (history read late) parts them
      const node = neighbour(entry.el, side);
      if (node && isAnswerStep(node)) this.regroup(node);
    }
    this.refreshActions();
    this.showLarge(entry, message);
    if (scroll) this.keepScrolled(wasNearBottom);
  }

  // A summary (`large`): say so, and read the whole message once it is final.
  showLarge(entry, message) {
    const large = Boolean(message.large);
    entry.el.classList.toggle("large", large);
    if (!large) {
      entry.note.hidden = true;
      return;
    }
    const length = formatCount(message.content_length || 0);
    entry.note.hidden = false;
    if (message.status === "streaming") {
      entry.note.textContent = `A long answer (${length} characters so far): it is shown whole when it ends.`;
      return;
    }
    entry.note.textContent = `Loading the whole message (${length} characters)…`;
    entry.el.setAttribute("aria-busy", "true");
    this.wholeReads.read(
      message.body_url,
      (whole) => {
        const current = this.messages.get(message.id);
        if (current && current.message.large) this.upsert(whole); // (kept at the end if it was there)
      },
      (error) => {
        entry.note.textContent = `The whole message could not be loaded (${error.message}); reload the page to try again.`;
        entry.el.setAttribute("aria-busy", "false");
      },
    );
  }

  renderBody(entry, message) {
    const body = entry.body;
    const live = entry.live;
    entry.textNode = null;
    entry.live = null;
    body.classList.remove("live");
    if (message.html) {
      // What the streamed HTML shows already stays: only what differs is replaced.
      if (!live || !finishLive(body, live, message.html)) {
        body.replaceChildren();
        body.innerHTML = message.html; // sanitized by the server
        enhance(body);
      }
      body.classList.remove("plain");
    } else if (message.status === "streaming" && message.text_html && !message.large) {
      body.replaceChildren();
      entry.live = startLive(body);
      showLive(body, entry.live, message.text_html, message.content || "");
    } else {
      body.replaceChildren();
      entry.textNode = document.createTextNode(message.content || "");
      body.append(entry.textNode);
      body.classList.add("plain");
    }
    entry.length = (message.content || "").length;
    body.hidden = !message.html && !message.content && message.status !== "streaming";
  }

  // The folded thinking: its text, and a summary that says while the model is still at it.
  renderThinking(entry, message) {
    const text = message.reasoning || "";
    entry.thought.textContent = text;
    entry.thinking.hidden = !text;
    this.labelThinking(entry);
  }

  labelThinking(entry) {
    const message = entry.message;
    const still = message.status === "streaming" && !(message.content || "");
    entry.summary.textContent = still ? "Thinking…" : "Thinking";
  }

  // A piece of thinking (`reasoning_delta`), placed by its offset like the text's.
  reasoningDelta(frame) {
    let entry = this.messages.get(frame.message_id);
    if (!entry) {
      this.upsert({ id: frame.message_id, role: "assistant", status: "streaming", content: "", html: "", error: "" });
      entry = this.messages.get(frame.message_id);
    }
    const shown = (entry.message.reasoning || "").length;
    const end = frame.offset + frame.text.length;
    if (frame.offset > shown || end <= shown) return; // missed (the final frame has it all) or shown
    const wasNearBottom = this.nearBottom();
    const piece = frame.text.slice(shown - frame.offset);
    entry.message = { ...entry.message, reasoning: (entry.message.reasoning || "") + piece };
    entry.thought.append(piece);
    entry.thinking.hidden = false;
    this.labelThinking(entry);
    this.keepScrolled(wasNearBottom);
  }

  delta(frame) {
    let entry = this.messages.get(frame.message_id);
    if (!entry) {
      this.upsert({ id: frame.message_id, role: "assistant", status: "streaming", content: "", html: "", error: "" });
      entry = this.messages.get(frame.message_id);
    }
    if (!entry.textNode && !entry.live) return; // already final HTML
    const end = frame.offset + frame.text.length;
    if (frame.offset > entry.length) return; // a frame was missed: message_complete carries the full text
    if (end <= entry.length) return; // already shown (history and live frames overlap)
    const wasNearBottom = this.nearBottom();
    const piece = frame.text.slice(entry.length - frame.offset);
    if (entry.live) appendRest(entry.body, entry.live, piece); // shown as text until its HTML comes
    else entry.textNode.appendData(piece);
    entry.length += piece.length;
    entry.message = { ...entry.message, content: (entry.message.content || "") + piece };
    entry.body.hidden = false;
    if (!entry.thinking.hidden) this.labelThinking(entry);
    this.keepScrolled(wasNearBottom);
  }

  // The HTML of a streaming message's text so far (`text_html`): applied when it continues what
  // is shown (its `from` is where the settled HTML shown ends), else left to message_complete.
  textHtml(frame) {
    const entry = this.messages.get(frame.message_id);
    if (!entry || entry.editing || entry.message.html || entry.message.large) return;
    if (entry.message.status !== "streaming") return;
    const live = entry.live;
    if (live ? frame.from !== live.to || frame.end < live.end : frame.from !== 0) return;
    const wasNearBottom = this.nearBottom();
    if (!live) {
      entry.body.replaceChildren();
      entry.textNode = null;
      entry.live = startLive(entry.body);
    }
    showLive(entry.body, entry.live, frame, entry.message.content || "");
    entry.body.hidden = false;
    this.keepScrolled(wasNearBottom);
  }

  // --- footer: usage and actions -------------------------------------------------------------
  // The actions and usage under a message; `steps`: every step of the answer it ends (itself last).
  renderFooter(entry, steps = [entry]) {
    const message = entry.message;
    entry.footer.replaceChildren();
    const actions = el("div", "message-actions");
    const text = () => steps.map((step) => step.message.content || "").filter(Boolean).join("\n\n");
    if (message.role !== "assistant" || message.status !== "streaming") {
      const copy = copyButton(text, { label: "Copy message", className: "copy-message" });
      if (text()) actions.append(copy);
    }
    if (message.role === "user") {
      const edit = iconButton("edit", "Edit and resend", "edit");
      edit.addEventListener("click", () => this.startEdit(entry));
      actions.append(edit);
    }
    if (message.role === "assistant") {
      const regenerate = iconButton("refresh", "Regenerate this answer", "regenerate");
      regenerate.hidden = true;
      regenerate.addEventListener("click", () => this.onRegenerate());
      actions.append(regenerate);
    }
    const usage = steps.length > 1 ? answerUsage(steps.map((step) => step.message)) : usageText(message);
    if (usage) {
      const span = el("span", "usage", usage.text);
      span.title = usage.title;
      entry.footer.append(span);
    }
    if (actions.childElementCount) entry.footer.append(actions);
  }

  // Regenerate shows on the last answer only (after the last user message); edit and regenerate
  // hide while a turn runs.
  refreshActions(running = this.running) {
    this.running = running;
    let lastAssistant = null;
    for (const entry of this.messages.values()) {
      if (entry.message.role === "user") lastAssistant = null;
      else if (entry.message.role === "assistant") lastAssistant = entry;
    }
    for (const entry of this.messages.values()) {
      const button = entry.footer.querySelector(".regenerate");
      if (button) button.hidden = running || entry !== lastAssistant;
      const edit = entry.footer.querySelector(".edit");
      if (edit) edit.hidden = running;
    }
  }

  startEdit(entry) {
    if (entry.editing || this.running || entry.message.large) return; // a summary: wait for the whole text
    entry.editing = true;
    entry.el.classList.add("editing");
    const form = el("form", "edit-form");
    const label = el("label", "sr-only", "Edit your message");
    const area = el("textarea");
    area.id = `edit-${entry.message.id}`;
    label.htmlFor = area.id;
    area.value = entry.message.content || "";
    area.rows = Math.min(10, Math.max(3, area.value.split("\n").length + 1));
    const buttons = el("div", "edit-buttons");
    const cancel = el("button", "secondary", "Cancel");
    cancel.type = "button";
    const save = el("button", "primary", "Send");
    save.type = "submit";
    buttons.append(cancel, save);
    const note = el("p", "note", "Sending replaces this message and the answers after it (the old ones are kept on the server).");
    const attached = this.editAttachments?.(entry.message);
    form.append(label, area, ...(attached ? [attached.element] : []), note, buttons);
    entry.body.after(form);
    entry.editForm = form;
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
    const stop = () => this.endEdit(entry);
    cancel.addEventListener("click", () => {
      stop();
      entry.el.querySelector(".edit")?.focus();
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = area.value;
      if (!text.trim()) return;
      if (this.onEdit(entry.message.id, text, attached?.take())) save.disabled = true;
    });
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        stop();
        entry.el.querySelector(".edit")?.focus();
      }
    });
  }

  endEdit(entry) {
    if (!entry.editing) return;
    entry.editing = false;
    entry.el.classList.remove("editing");
    entry.editForm?.remove();
    entry.editForm = null;
    this.upsert(entry.message);
  }

  // An edit the server refused: the form stays, its button comes back.
  editFailed() {
    for (const entry of this.messages.values()) {
      const button = entry.editForm?.querySelector("button[type=submit]");
      if (button) button.disabled = false;
    }
  }

  // --- tool calls ----------------------------------------------------------------------------
  upsertCall(call, scroll = true) {
    const wasNearBottom = this.nearBottom();
    let card = this.calls.get(call.id);
    let entry = this.messages.get(call.message_id);
    // A finished call never runs again: a frame that crossed its result (the step's own frames,
    // sent as its row was written) would draw it back as running and take its result away.
    if (card && call.status === "running" && finished(card)) return;
    if (!card) {
      if (!entry) {
        this.upsert({ id: call.message_id, role: "assistant", status: "streaming", content: "", html: "", error: "" });
        entry = this.messages.get(call.message_id);
      }
      card = el("div", "tool-card");
      entry.calls.append(card);
      this.calls.set(call.id, card);
    }
    renderCall(card, call, this.urls);
    showView(card, call);
    if (entry) updateGroup(entry.calls);
    if (scroll) this.keepScrolled(wasNearBottom);
    if (call.large) {
      // Structured content, images and links left out of the frame: read the whole call.
      this.wholeReads.read(
        call.call_url,
        (whole) => {
          if (this.calls.get(call.id) !== card) return;
          renderCall(card, whole, this.urls);
          showView(card, whole);
        },
        () => {},
      );
    }
  }

  card(callId) {
    return this.calls.get(callId);
  }
}

function usageText(message) {
  if (message.role !== "assistant" || !("usage" in message) || message.status === "streaming") return null;
  const usage = message.usage;
  if (usage && (usage.prompt_tokens !== null || usage.completion_tokens !== null)) {
    const total = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
    return {
      text: `${formatCount(usage.prompt_tokens)} in · ${formatCount(usage.completion_tokens)} out`,
      title: `${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion = ${total} tokens`,
    };
  }
  if (message.status === "failed") return null;
  return { text: "no usage reported", title: "The model endpoint sent no token counts for this answer." };
}

// The usage of an answer of several steps: each step's tokens added up.
function answerUsage(messages) {
  const last = messages[messages.length - 1];
  if (last.status === "streaming") return null;
  const counted = messages.filter((m) => m.usage && (m.usage.prompt_tokens !== null || m.usage.completion_tokens !== null));
  if (!counted.length) return usageText(last);
  const sum = (key) => counted.reduce((total, m) => total + (m.usage[key] || 0), 0);
  const [prompt, completion] = [sum("prompt_tokens"), sum("completion_tokens")];
  const missing = messages.length - counted.length;
  return {
    text: `${formatCount(prompt)} in · ${formatCount(completion)} out` + (missing ? ` · ${missing} step${missing === 1 ? "" : "s"} without usage` : ""),
    title: `${messages.length} steps: ${prompt} prompt + ${completion} completion = ${prompt + completion} tokens`,
  };
}

// The message next to `node` (`side` -1: before it, 1: after it), or null.
function neighbour(node, side) {
  let other = side < 0 ? node.previousElementSibling : node.nextElementSibling;
  while (other && !other.classList.contains("message")) other = side < 0 ? other.previousElementSibling : other.nextElementSibling;
  return other;
}

function finished(card) {
  return [...card.classList].some((name) => name.startsWith("status-") && name !== "status-running");
}

function isAnswerStep(node) {
  return node.classList.contains("role-assistant");
}

// Calls of one step: a heading with how many, and a line joining them.
function updateGroup(container) {
  const cards = [...container.querySelectorAll(".tool-card")];
  let head = container.querySelector(".tool-group-head");
  if (cards.length < 2) {
    container.classList.remove("grouped");
    head?.remove();
    return;
  }
  container.classList.add("grouped");
  if (!head) {
    head = el("p", "tool-group-head");
    container.prepend(head);
  }
  const running = cards.filter((card) => card.classList.contains("status-running")).length;
  const failed = cards.filter((card) => card.classList.contains("is-error") || card.classList.contains("status-error")).length;
  let text = `${cards.length} tool calls in one step`;
  if (running) text += ` · ${running} running`;
  if (failed) text += ` · ${failed} failed`;
  head.textContent = text;
}

// --- streamed HTML --------------------------------------------------------------------------
// `live`: where the settled HTML ends in the text (`to`) and what it is (`settled`), the open
// block's nodes (`tail`) and HTML (`tailHtml`, null: shown as text), how far that HTML goes
// (`end`) and the Text node of what came after it (`rest`).
function startLive(body) {
  body.classList.remove("plain");
  body.classList.add("live");
  return { to: 0, settled: "", tail: [], tailHtml: "", end: 0, rest: null };
}

function showLive(body, live, frame, content) {
  clearTail(live);
  if (frame.settled) {
    insertHtml(body, frame.settled); // sanitized by the server
    live.settled += frame.settled;
  }
  live.to = frame.to;
  live.end = frame.end;
  if (frame.tail === null) { // no longer rendered while it streams: the rest is text
    const raw = el("div", "stream-raw");
    body.append(raw);
    live.tail = [raw];
    live.tailHtml = null;
    appendRest(body, live, content.slice(frame.to));
  } else {
    live.tail = insertHtml(body, frame.tail); // sanitized by the server
    live.tailHtml = frame.tail;
    appendRest(body, live, content.slice(frame.end));
  }
}

// The final HTML where streamed HTML is shown: true when what is shown was kept and only the
// open block replaced (when it differs); false when the settled part differs too.
function finishLive(body, live, html) {
  if (!html.startsWith(live.settled)) return false;
  const tail = html.slice(live.settled.length);
  if (tail === live.tailHtml) {
    live.rest?.remove();
    return true;
  }
  clearTail(live);
  insertHtml(body, tail);
  return true;
}

function clearTail(live) {
  for (const node of live.tail) node.remove();
  live.tail = [];
  live.rest?.remove();
  live.rest = null;
}

// Blocks the text not yet rendered goes into (at their end): a paragraph, an item, a code block.
const REST_INTO = new Set(["P", "LI", "UL", "OL", "BLOCKQUOTE", "PRE", "CODE", "DIV", "H1", "H2", "H3", "H4", "H5", "H6"]);

function appendRest(body, live, text) {
  if (!text) return;
  if (!live.rest) {
    let into = [...live.tail].reverse().find((node) => node.nodeType === Node.ELEMENT_NODE);
    if (into && REST_INTO.has(into.tagName)) {
      while (into.lastElementChild && REST_INTO.has(into.lastElementChild.tagName)) into = into.lastElementChild;
    } else {
      into = body;
    }
    live.rest = document.createTextNode("");
    into.append(live.rest);
  }
  live.rest.appendData(text);
}

// Inserts sanitized HTML at the end of `body`; returns the nodes it became (code blocks wrapped).
function insertHtml(body, html) {
  const mark = body.lastChild;
  const template = document.createElement("template");
  template.innerHTML = html; // sanitized by the server
  body.append(template.content);
  const added = () => {
    const nodes = [];
    for (let node = mark ? mark.nextSibling : body.firstChild; node; node = node.nextSibling) nodes.push(node);
    return nodes;
  };
  enhance(body, added());
  return added();
}

// Code blocks get a language label and a copy button; links open in a new tab, safely; tables
// and code that scroll become reachable by keyboard. `nodes`: only these (and what they hold).
function enhance(body, nodes = [body]) {
  const within = (selector) => nodes.flatMap((node) => (node.nodeType === Node.ELEMENT_NODE
    ? [...(node.matches(selector) ? [node] : []), ...node.querySelectorAll(selector)]
    : []));
  for (const pre of within("pre")) {
    const code = pre.querySelector("code");
    const language = code ? [...code.classList].find((name) => name.startsWith("language-")) : null;
    const block = el("div", "code-block");
    const head = el("div", "code-head");
    head.append(el("span", "code-lang", language ? language.slice("language-".length) : "text"));
    head.append(copyButton(() => (code || pre).textContent.replace(/\n$/, ""), { label: "Copy", withText: true, className: "copy-code" }));
    pre.replaceWith(block);
    block.append(head, pre);
    markScrollable(pre);
  }
  for (const link of within("a[href]")) {
    link.target = "_blank";
    link.rel = "noopener noreferrer nofollow";
  }
  for (const table of within("table")) markScrollable(table);
}
