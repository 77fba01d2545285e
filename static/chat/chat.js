// BooCode chat page: one websocket per tab, frames as in docs/protocol.md.
//
// Safety rule: text from the model or from tools is only ever inserted as text (textContent,
// Text nodes). The only HTML inserted is the "html" field of a message, which the server
// rendered from Markdown and sanitized. Images are only data: URLs of raster types.

import { endElicitation, renderElicitation, showElicitationError } from "./elicitation.js";

const root = document.getElementById("chat");
const messagesEl = document.getElementById("messages");
const form = document.getElementById("composer");
const input = document.getElementById("message-input");
const sendButton = document.getElementById("send-button");
const stopButton = document.getElementById("stop-button");
const errorEl = document.getElementById("chat-error");
const connEl = document.getElementById("connection-state");
const modelEl = document.getElementById("model-state");
const serversEl = document.getElementById("server-states");

const IMAGE_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const ROLE_LABELS = { user: "You", assistant: "Assistant", console: "Console", notice: "Notice" };

const state = {
  ws: null,
  retry: 0,
  running: false,
  closedForGood: false,
  messages: new Map(), // id -> {el, body, textNode, length, status}
  calls: new Map(), // id -> element
  forms: new Map(), // elicitation id -> form element (open forms only)
};

function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function nearBottom() {
  return messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 80;
}

function keepScrolled(wasNearBottom) {
  if (wasNearBottom) messagesEl.scrollTop = messagesEl.scrollHeight;
}

function showError(text) {
  if (!errorEl) return;
  errorEl.textContent = text || "";
  errorEl.hidden = !text;
}

function setRunning(running) {
  state.running = running;
  if (stopButton) stopButton.hidden = !running;
  if (sendButton) sendButton.disabled = running;
  root.classList.toggle("running", running);
}

// --- messages ------------------------------------------------------------------------------
function renderBody(entry, message) {
  const body = entry.body;
  body.replaceChildren();
  entry.textNode = null;
  if (message.html) {
    // Server-rendered Markdown, sanitized with an allowlist (boocode/chat/rendering.py).
    body.innerHTML = message.html;
    body.classList.remove("plain");
  } else {
    entry.textNode = document.createTextNode(message.content || "");
    body.append(entry.textNode);
    body.classList.add("plain");
  }
  entry.length = (message.content || "").length;
}

function upsertMessage(message) {
  const wasNearBottom = nearBottom();
  let entry = state.messages.get(message.id);
  if (!entry) {
    const article = el("article", "message");
    article.dataset.id = message.id;
    const header = el("header", "message-header");
    header.append(el("span", "role", ROLE_LABELS[message.role] || message.role));
    const badge = el("span", "badge");
    header.append(badge);
    const body = el("div", "message-body");
    const error = el("p", "message-error");
    error.hidden = true;
    const calls = el("div", "tool-calls");
    article.append(header, body, calls, error);
    entry = { el: article, body, badge, error, calls, textNode: null, length: 0 };
    state.messages.set(message.id, entry);
    insertInOrder(article, message.id);
  }
  entry.el.className = `message role-${message.role} status-${message.status}`;
  entry.status = message.status;
  entry.badge.textContent = message.status === "complete" ? "" : message.status;
  renderBody(entry, message);
  entry.error.textContent = message.error || "";
  entry.error.hidden = !message.error;
  for (const call of message.tool_calls || []) upsertCall(call);
  keepScrolled(wasNearBottom);
}

function insertInOrder(article, id) {
  // Messages arrive in order, except after a reconnect when a history frame and live frames overlap.
  for (const other of messagesEl.children) {
    if (Number(other.dataset.id) > id) {
      messagesEl.insertBefore(article, other);
      return;
    }
  }
  messagesEl.append(article);
}

function appendDelta(frame) {
  let entry = state.messages.get(frame.message_id);
  if (!entry) {
    upsertMessage({ id: frame.message_id, role: "assistant", status: "streaming", content: "", html: "", error: "" });
    entry = state.messages.get(frame.message_id);
  }
  if (!entry.textNode) return; // already rendered as final HTML
  const end = frame.offset + frame.text.length;
  if (frame.offset > entry.length) {
    entry.gap = true; // a frame was missed; message_complete will replace the text
    return;
  }
  if (end <= entry.length) return; // already shown (history and live frames overlap)
  const wasNearBottom = nearBottom();
  const piece = frame.text.slice(entry.length - frame.offset);
  entry.textNode.appendData(piece);
  entry.length += piece.length;
  keepScrolled(wasNearBottom);
}

// --- tool cards -----------------------------------------------------------------------------
function outputUrl(callId) {
  return (root.dataset.outputUrl || "").replace(/\/0\/output\/$/, `/${callId}/output/`);
}

function upsertCall(call) {
  const wasNearBottom = nearBottom();
  let card = state.calls.get(call.id);
  if (!card) {
    let parent = state.messages.get(call.message_id);
    if (!parent) {
      upsertMessage({ id: call.message_id, role: "assistant", status: "streaming", content: "", html: "", error: "" });
      parent = state.messages.get(call.message_id);
    }
    card = el("details", "tool-card");
    card.dataset.id = call.id;
    parent.calls.append(card);
    state.calls.set(call.id, card);
  }
  const open = card.open;
  card.replaceChildren();
  card.className = `tool-card status-${call.status}${call.is_error ? " is-error" : ""}`;
  const summary = el("summary", "tool-summary");
  summary.append(el("span", "tool-name", call.name));
  summary.append(el("span", "badge", call.status));
  if (call.duration_ms !== null && call.duration_ms !== undefined) {
    summary.append(el("span", "duration", `${call.duration_ms} ms`));
  }
  card.append(summary);
  card.append(el("div", "label", "Arguments"));
  card.append(el("pre", "tool-arguments", call.arguments || "{}"));
  if (call.status !== "running") {
    card.append(el("div", "label", call.is_error ? "Error" : "Result"));
    card.append(el("pre", "tool-output", call.output));
    if (call.output_truncated) {
      const link = el("a", "full-output", `Full output (${call.output_length} characters)`);
      link.href = outputUrl(call.id);
      link.target = "_blank";
      link.rel = "noopener";
      card.append(link);
    }
    for (const src of call.images || []) {
      if (typeof src === "string" && IMAGE_URL.test(src)) {
        const img = el("img", "tool-image");
        img.alt = `image from ${call.name}`;
        img.src = src;
        card.append(img);
      }
    }
    if (call.images_left_out) {
      card.append(el("p", "note", `${call.images_left_out} image(s) not shown (type not allowed or too large).`));
    }
  }
  card.open = open || call.is_error || (call.images && call.images.length > 0) || false;
  keepScrolled(wasNearBottom);
}

// --- forms (elicitation) ---------------------------------------------------------------------
function showForm(elicitation) {
  if (state.forms.has(elicitation.id)) return;
  const wasNearBottom = nearBottom();
  const formEl = renderElicitation(elicitation, send);
  const card = state.calls.get(elicitation.call_id);
  if (card) card.after(formEl); // beside the card, visible even when the card is folded
  else messagesEl.append(formEl);
  state.forms.set(elicitation.id, formEl);
  keepScrolled(wasNearBottom);
  const first = formEl.querySelector("input, select, button");
  if (first && wasNearBottom) first.focus({ preventScroll: true });
}

function closeForm(frame) {
  const formEl = state.forms.get(frame.id);
  if (!formEl) return;
  state.forms.delete(frame.id);
  endElicitation(formEl, frame.outcome);
}

// --- status line ----------------------------------------------------------------------------
// Statuses that read better in words (OAuth: see docs/configuration.md, "Signing in").
const STATUS_WORDS = { auth_required: "needs a sign-in", per_user: "per person (Your accounts)" };

function renderStatus(frame) {
  const model = frame.model || {};
  if (!model.configured) {
    modelEl.textContent = "no model configured";
    modelEl.className = "model bad";
    modelEl.title = "Set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL";
  } else if (model.last_error) {
    modelEl.textContent = `model: ${model.name} (unreachable)`;
    modelEl.className = "model bad";
    modelEl.title = model.last_error;
  } else {
    modelEl.textContent = `model: ${model.name}`;
    modelEl.className = "model";
    modelEl.title = "";
  }
  serversEl.replaceChildren();
  const servers = frame.servers || [];
  if (!servers.length) {
    serversEl.append(el("span", "server none", "no MCP servers"));
  }
  for (const server of servers) {
    const item = el("span", `server server-${server.status}`);
    item.dataset.name = server.name;
    const state = STATUS_WORDS[server.status] || server.status;
    item.textContent = `${server.name}: ${state}` + (server.status === "ready" ? ` (${server.tool_count} tools)` : "");
    if (server.last_error) item.title = server.last_error;
    serversEl.append(item);
  }
}

function setConnection(text, good) {
  connEl.textContent = text;
  connEl.className = `conn ${good ? "good" : "bad"}`;
}

// --- frames ---------------------------------------------------------------------------------
function handle(frame) {
  switch (frame.type) {
    case "history":
      state.messages.clear();
      state.calls.clear();
      state.forms.clear();
      messagesEl.replaceChildren();
      for (const message of frame.messages) upsertMessage(message);
      for (const elicitation of frame.elicitations || []) showForm(elicitation);
      setRunning(frame.running);
      messagesEl.scrollTop = messagesEl.scrollHeight;
      break;
    case "status":
      renderStatus(frame);
      break;
    case "turn_start":
      setRunning(true);
      showError("");
      break;
    case "message":
    case "message_start":
    case "message_complete":
      upsertMessage(frame.message);
      break;
    case "text_delta":
      appendDelta(frame);
      break;
    case "tool_call":
    case "tool_result":
      upsertCall(frame.call);
      break;
    case "elicitation":
      showForm(frame.elicitation);
      break;
    case "elicitation_end":
      closeForm(frame);
      break;
    case "turn_end":
      setRunning(false);
      break;
    case "error":
      if (frame.id && state.forms.has(frame.id)) showElicitationError(state.forms.get(frame.id), frame.message);
      else showError(frame.message);
      break;
    default:
      break; // newer server: ignore unknown frames
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}${root.dataset.wsPath}`);
  state.ws = ws;
  setConnection("connecting…", false);
  ws.addEventListener("open", () => {
    state.retry = 0;
    setConnection("connected", true);
  });
  ws.addEventListener("message", (event) => {
    try {
      handle(JSON.parse(event.data));
    } catch (error) {
      console.error("bad frame", error);
    }
  });
  ws.addEventListener("close", (event) => {
    if (state.ws !== ws) return;
    state.ws = null;
    if (event.code === 4401) {
      state.closedForGood = true;
      setConnection("logged out — reload the page to log in", false);
      return;
    }
    if (event.code === 4403) {
      state.closedForGood = true;
      setConnection("this conversation is not yours", false);
      return;
    }
    const delay = Math.min(10000, 500 * 2 ** state.retry) + Math.random() * 250;
    state.retry += 1;
    setConnection(`disconnected — reconnecting in ${Math.round(delay / 1000)} s`, false);
    setTimeout(connect, delay);
  });
}

function send(frame) {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
    showError("Not connected; reconnecting…");
    return false;
  }
  state.ws.send(JSON.stringify(frame));
  return true;
}

// --- page controls --------------------------------------------------------------------------
function setupComposer() {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim() || state.running) return;
    if (send({ type: "user_message", text })) {
      input.value = "";
      showError("");
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", () => send({ type: "cancel" }));
}

async function post(url, data) {
  const body = new URLSearchParams(data);
  const response = await fetch(url, {
    method: "POST",
    body,
    headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
    credentials: "same-origin",
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response.json();
}

function setupConversationControls() {
  const agentSelect = document.getElementById("agent-select");
  if (agentSelect) {
    agentSelect.addEventListener("change", async () => {
      try {
        await post(agentSelect.dataset.url, { agent: agentSelect.value });
        showError("");
      } catch (error) {
        showError(`Could not change the agent (${error.message}).`);
      }
    });
  }
  const renameForm = document.getElementById("rename-form");
  if (renameForm) {
    renameForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const result = await post(renameForm.action, { title: renameForm.elements.title.value });
        document.getElementById("conversation-title").textContent = result.title;
        const link = document.querySelector(`.conversation-list a[data-id="${result.id}"]`);
        if (link) link.textContent = result.title;
        document.title = `${result.title} · BooCode`;
      } catch (error) {
        showError(`Could not rename (${error.message}).`);
      }
    });
  }
  const deleteForm = document.getElementById("delete-form");
  if (deleteForm) {
    deleteForm.addEventListener("submit", (event) => {
      if (!window.confirm("Delete this conversation and all its messages?")) event.preventDefault();
    });
  }
  const toggle = document.getElementById("sidebar-toggle");
  const sidebar = document.getElementById("sidebar");
  toggle.addEventListener("click", () => {
    const open = sidebar.classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(open));
  });
}

setupConversationControls();
if (root.dataset.wsPath && messagesEl) {
  setupComposer();
  connect();
}
