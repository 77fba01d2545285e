// BooCode chat page: wires the modules together and handles the websocket's frames
// (docs/protocol.md). The page is either the landing (no conversation yet: the first message
// creates one with POST /c/new/, then opens its socket and sends the text) or one conversation.
//
// Safety rule: text from the model, tools or MCP servers is only ever inserted as text. The only
// HTML inserted is a message's "html" field, which the server rendered from Markdown and sanitized.

import { Approvals } from "./approval.js";
import { setViewHost, viewReply, viewsDisconnected } from "./appviews.js";
import { Composer } from "./composer.js";
import { showContext, showSummaries } from "./context.js";
import { announce, post, showText } from "./dom.js";
import { endElicitation, markElicitationWaiting, renderElicitation, showElicitationError } from "./elicitation.js";
import { Thread } from "./messages.js";
import { addStep, showWaiting } from "./toolcards.js";
import { Attacher } from "./resources.js";
import { clearProgress, showProgress } from "./progress.js";
import { AgentPicker, ModelPicker, agentCard } from "./pickers.js";
import { Sidebar } from "./sidebar.js";
import { SlashMenu } from "./slash.js";
import { Connection } from "./socket.js";
import { StatusLine } from "./status.js";
import { setupTheme } from "./theme.js";

const root = document.getElementById("chat");
const titleEl = document.getElementById("conversation-title");
const errorEl = document.getElementById("chat-error");
const menuButton = document.getElementById("conversation-menu-button");
const jumpButton = document.getElementById("jump-latest");
const agentSelect = document.getElementById("agent-select");
const modelSelect = document.getElementById("model-select");
const LANDING_TITLE = "New conversation";
const EDIT_ERRORS = new Set(["unknown_message", "bad_text", "too_long", "bad_attachments"]);

const page = {
  conversation: root.dataset.conversation ? Number(root.dataset.conversation) : null,
  connection: null,
  running: false,
  pendingText: null,
  pendingFrame: null, // a prompt chosen on the landing: sent once the new conversation is connected
  sentText: null, // a user_message sent and not yet seen stored: put back if the server refuses it
  forms: new Map(), // elicitation id -> form element (open forms only)
};

function showError(text) {
  showText(errorEl, text);
}

function readAgents() {
  const data = document.getElementById("agents-data");
  try {
    const parsed = data ? JSON.parse(data.textContent) : null;
    return Array.isArray(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

// --- the pieces ----------------------------------------------------------------------------------
const status = new StatusLine();

const thread = new Thread(document.getElementById("messages"), {
  urls: {
    output: (callId) => `/c/${page.conversation}/calls/${callId}/output/`,
    earlier: (before) => `/c/${page.conversation}/messages/?before=${before}`,
  },
  welcome: document.getElementById("welcome"),
  onEdit: (messageId, text, attachments) =>
    send({ type: "edit", message_id: messageId, text, ...(attachments ? { attachments } : {}) }),
  editAttachments: (message) => attacher.editor(message.attachments), // resources.js
  onRegenerate: () => send({ type: "regenerate" }),
  onScrollState: (near) => {
    jumpButton.hidden = near || thread.isEmpty;
  },
});
jumpButton.addEventListener("click", () => {
  thread.scrollToEnd();
  composer.focus();
});

const agents = agentSelect
  ? new AgentPicker({
    root: document.getElementById("agent-picker"),
    select: agentSelect,
    panel: document.getElementById("agent-panel"),
    options: document.getElementById("agent-options"),
    initial: readAgents(),
    getConversation: () => page.conversation,
    onChange: () => renderAgentCard(),
    onSaved: () => models?.load().then(() => renderAgentCard()),
    onError: showError,
  })
  : null;

const models = modelSelect
  ? new ModelPicker({
    select: modelSelect,
    getConversation: () => page.conversation,
    onError: showError,
    onChange: () => renderAgentCard(),
  })
  : null;

const composer = new Composer({
  form: document.getElementById("composer"),
  input: document.getElementById("message-input"),
  sendButton: document.getElementById("send-button"),
  stopButton: document.getElementById("stop-button"),
  onSend: (text) => (page.conversation === null ? startConversation(text) : sendMessage(text)),
  onStop: () => send({ type: "cancel" }),
});

const attacher = new Attacher({ form: document.getElementById("composer") });

// "/" in the composer: console commands, MCP prompts (a prompt on the landing starts a conversation)
// and MCP skills, which attach to the message like resources (resources.js).
new SlashMenu({
  composer,
  onSkill: (skill) => {
    const problem = skill.problem
      ? `The skill ${skill.label} of ${skill.server} cannot be loaded: ${skill.problem}.`
      : attacher.attachSkill(skill);
    if (problem) showError(problem);
    return problem;
  },
  onPrompt: async (frame) => {
    if (page.conversation !== null) return send(frame);
    page.pendingFrame = frame;
    if (await startConversation(null)) return true;
    page.pendingFrame = null;
    return false;
  },
});

// Tool calls waiting for the person's approval (static/chat/approval.js).
const approvals = new Approvals({ thread, send: (frame) => send(frame) });

const sidebar = new Sidebar({
  getConversation: () => page.conversation,
  onDeletedCurrent: () => window.location.assign("/"),
  onRenamed: (id, title) => {
    if (id === page.conversation) setTitle(title);
  },
  onNewConversation: () => showLanding(),
});

// The model the conversation uses: its pick, else its agent's `model:`, else the server's default ("").
function effectiveModel() {
  if (!models) return "";
  if (models.value) return models.value;
  return agents ? (agents.current && agents.current.model) || "" : models.defaultModel;
}

// The card names the same model as the status line (the server's default when that is "").
function renderAgentCard() {
  const model = effectiveModel();
  status.setModel(model);
  const slot = document.getElementById("agent-card-slot");
  if (!slot) return;
  const agent = agents ? agents.current : null;
  const fallback = models ? models.defaultModel : status.root.dataset.serverModel || "";
  const card = agent ? agentCard(agent, model || fallback) : null;
  // Unchanged (a refresh that brought nothing new): the card stays as it is, no flicker.
  if (card && slot.childElementCount === 1 && slot.firstElementChild.isEqualNode(card)) return;
  slot.replaceChildren(...(card ? [card] : []));
}

// The agent card's tools follow the MCP servers: a server that becomes ready, changes its tools
// or goes down (the `status` frame) re-reads /api/agents/, debounced. The landing has no socket:
// there the agents are re-read every few seconds while the page is shown.
const AGENTS_DEBOUNCE_MS = 400;
const LANDING_POLL_MS = 5000;
let agentsTimer = null;
let serversSeen = null;

function refreshAgentsSoon() {
  if (!agents) return;
  clearTimeout(agentsTimer);
  agentsTimer = setTimeout(() => {
    agentsTimer = null;
    agents.refresh().then(() => renderAgentCard());
  }, AGENTS_DEBOUNCE_MS);
}

function followServers(frame) {
  const key = JSON.stringify((frame.servers || []).map((server) => [server.name, server.status, server.tool_count]));
  if (key !== serversSeen) refreshAgentsSoon();
  serversSeen = key;
}

// --- conversation state ------------------------------------------------------------------------------
function setTitle(title) {
  titleEl.textContent = title;
  document.title = page.conversation === null ? "BooCode" : `${title} · BooCode`;
  if (page.conversation !== null) sidebar.setTitle(page.conversation, title);
}

function setRunning(running) {
  page.running = running;
  root.classList.toggle("running", running);
  composer.setRunning(running);
  thread.refreshActions(running);
}

// The `conversation` object (history's conversation_info, the conversation frame).
function applyConversation(info) {
  if (!info || info.id !== page.conversation) return;
  if (typeof info.title === "string" && info.title) setTitle(info.title);
  if (models && typeof info.model === "string" && document.activeElement !== modelSelect) models.set(info.model);
  renderAgentCard(); // and the status line's model
  status.usage(info.usage);
  status.budget(info.budget); // the person's daily budget, when one applies to them
  showContext(document.getElementById("context-meter"), info.context);
  showSummaries(document.getElementById("messages"), info.summaries);
}

function send(frame) {
  if (!page.connection || !page.connection.send(frame)) {
    showError("Not connected; reconnecting…");
    return false;
  }
  showError("");
  return true;
}

function sendMessage(text) {
  if (page.connection && !page.connection.isOpen && page.pendingText === null) {
    // Still connecting (or reconnecting): held in place in the list, marked as waiting, and sent
    // as soon as the socket is back (see "history").
    page.pendingText = text;
    thread.hold(text);
    showError("");
    return true;
  }
  return sendUserMessage(text);
}

function sendUserMessage(text) {
  const attachments = attacher.take(); // resources.js: the chips go with the message
  if (!send({ type: "user_message", text, ...(attachments.length ? { attachments } : {}) })) {
    attacher.restore();
    return false;
  }
  page.sentText = text;
  return true;
}

// Nothing typed is lost: a message the server refused (or that could not be sent) goes back into
// the composer, before anything typed since.
const REFUSALS = new Set(["turn_in_progress", "too_long", "bad_text", "bad_attachments"]);
function putBack(text, why) {
  const input = composer.input;
  if (input.value !== text) input.value = input.value.trim() ? `${text}\n\n${input.value}` : text;
  composer.autosize();
  composer.focus();
  showError(why);
}

function connect() {
  page.connection = new Connection(`/ws/conversations/${page.conversation}/`, {
    onFrame: handle,
    onState: (text, good) => {
      status.connection(text, good);
      if (!good) viewsDisconnected();
      if (page.connection && page.connection.stopped && page.pendingText !== null) {
        // Stopped for good (logged out, not yours): the held message goes back into the box.
        const held = page.pendingText;
        page.pendingText = null;
        thread.unhold();
        putBack(held, "Not connected: your message is back in the box.");
      }
    },
  });
  page.connection.start();
}

// What MCP Apps views may use (appviews.js): the socket for their requests, and a message the
// person confirmed (sent now, or put in the composer while a turn runs).
setViewHost({
  send: (frame) => Boolean(page.connection && page.connection.send(frame)),
  sendMessage: (text) => sendMessage(text),
  running: () => page.running,
  draft: (text) => putBack(text, "A turn is running: the view's message waits here until it ends."),
});

// The landing's first message: create the conversation, open it in place, send once connected.
async function startConversation(text) {
  showError("");
  const fields = {};
  if (agentSelect && agentSelect.value) fields.agent = agentSelect.value;
  let created;
  try {
    const { data, response } = await post("/c/new/", fields);
    created = data && data.id ? data : fromRedirect(response);
  } catch (error) {
    showError(`Could not start a conversation (${error.message}).`);
    return false;
  }
  if (!created) {
    showError("Could not start a conversation (unexpected answer from the server).");
    return false;
  }
  if (models && models.value) await models.saveFor(created.id);
  const url = created.url || `/c/${created.id}/`;
  page.conversation = created.id;
  page.pendingText = text;
  root.dataset.conversation = String(created.id);
  root.dataset.wsPath = `/ws/conversations/${created.id}/`;
  if (agentSelect) agentSelect.dataset.url = `/c/${created.id}/agent/`;
  menuButton.dataset.id = String(created.id);
  menuButton.hidden = false;
  history.replaceState({ conversation: created.id }, "", url);
  sidebar.add({ id: created.id, title: LANDING_TITLE, url });
  setTitle(LANDING_TITLE);
  connect();
  return true;
}

// A server that redirects JSON callers too: the conversation's id is in the final URL.
function fromRedirect(response) {
  const match = /\/c\/(\d+)\/$/.exec(new URL(response.url).pathname);
  return match ? { id: Number(match[1]), url: new URL(response.url).pathname } : null;
}

// "New conversation" with scripts on: back to the landing in place (no empty conversation made).
function showLanding() {
  if (page.conversation !== null) {
    if (page.connection) page.connection.stop();
    page.connection = null;
    page.conversation = null;
    page.pendingText = null;
    page.sentText = null;
    thread.unhold();
    page.forms.clear();
    delete root.dataset.conversation;
    delete root.dataset.wsPath;
    if (agentSelect) delete agentSelect.dataset.url;
    menuButton.hidden = true;
    thread.clear();
    setRunning(false);
    status.connection("", true);
    status.usage(null);
    status.budget(null);
    if (models) models.set("");
    setTitle(LANDING_TITLE);
    sidebar.markCurrent(null);
    history.pushState({ landing: true }, "", root.dataset.landingUrl || "/c/new/");
    renderAgentCard();
  }
  showError("");
  composer.focus();
  return true;
}

// --- forms an MCP server asks for (elicitation) --------------------------------------------------------
function showForm(elicitation) {
  if (page.forms.has(elicitation.id)) return;
  const wasNearBottom = thread.nearBottom();
  const formEl = renderElicitation(elicitation, send);
  const card = thread.card(elicitation.call_id);
  if (card) addStep(card, formEl); // inside its call's card, after what came before it
  else thread.container.append(formEl);
  page.forms.set(elicitation.id, formEl);
  thread.keepScrolled(wasNearBottom);
  const first = formEl.querySelector("input, select, button");
  // Never onto a link's Open button: an Enter meant for the composer must not open a page.
  if (first && wasNearBottom && elicitation.mode !== "url") first.focus({ preventScroll: true });
}

function closeForm(frame) {
  const formEl = page.forms.get(frame.id);
  if (!formEl) return;
  page.forms.delete(frame.id);
  const card = formEl.closest(".tool-card");
  const done = endElicitation(formEl, frame.outcome);
  if (card) {
    done.classList.add("call-step"); // stays in its place in the call's card
    showWaiting(card);
  }
}

// --- frames ----------------------------------------------------------------------------------------------
// The stored user message is the text this tab sent (a long one comes as its summary's beginning).
function isSentText(message) {
  if (!message || message.role !== "user" || page.sentText === null) return false;
  return message.large ? page.sentText.startsWith(message.content) : message.content === page.sentText;
}

function handle(frame) {
  switch (frame.type) {
    case "view_reply":
      viewReply(frame);
      break;
    case "history":
      page.forms.clear();
      thread.clear();
      clearProgress();
      for (const message of frame.messages) thread.upsert(message);
      thread.setMore(Boolean(frame.more));
      for (const entry of frame.progress || []) showProgress(entry, thread.card(entry.call_id));
      for (const elicitation of frame.elicitations || []) showForm(elicitation);
      approvals.reset();
      for (const approval of frame.approvals || []) approvals.show(approval);
      setRunning(Boolean(frame.running));
      thread.scrollToEnd();
      applyConversation(frame.conversation_info);
      renderAgentCard();
      if (page.pendingFrame !== null) {
        const pending = page.pendingFrame;
        page.pendingFrame = null;
        send(pending);
      }
      if (page.pendingText !== null) {
        const text = page.pendingText;
        page.pendingText = null;
        if (frame.running) {
          thread.unhold();
          putBack(text, "An answer is still being written here: your message is back in the box; send it when it ends.");
        } else if (sendUserMessage(text)) {
          thread.heldSending(); // until its stored message takes its place
        } else {
          thread.unhold();
          putBack(text, "Not connected: your message is back in the box.");
        }
      }
      break;
    case "status":
      status.render(frame);
      followServers(frame);
      break;
    case "conversation":
      applyConversation(frame.conversation);
      break;
    case "context_summary":
      if (frame.conversation === page.conversation) showSummaries(document.getElementById("messages"), [frame.summary]);
      break;
    case "turn_start":
      setRunning(true);
      showError("");
      break;
    case "message":
    case "message_start":
    case "message_complete":
      if (isSentText(frame.message)) {
        page.sentText = null; // stored: the turn took it (and it takes the held row's place)
        thread.unhold();
      }
      thread.upsert(frame.message);
      break;
    case "text_delta":
      thread.delta(frame);
      break;
    case "reasoning_delta":
      thread.reasoningDelta(frame);
      break;
    case "text_html":
      thread.textHtml(frame);
      break;
    case "tool_call":
    case "tool_result":
      thread.upsertCall(frame.call);
      break;
    case "tool_progress":
      showProgress(frame, thread.card(frame.call_id));
      break;
    case "superseded":
      thread.remove(frame.message_ids || []);
      break;
    case "elicitation":
      showForm(frame.elicitation);
      break;
    case "elicitation_end":
      closeForm(frame);
      break;
    case "approval":
      approvals.show(frame.approval);
      break;
    case "approval_end":
      approvals.end(frame);
      break;
    case "elicitation_waiting":
      if (page.forms.has(frame.id)) markElicitationWaiting(page.forms.get(frame.id), frame, send);
      break;
    case "turn_end":
      setRunning(false);
      if (frame.status === "stopped") announce("Stopped.");
      break;
    case "error":
      if (frame.code === "frame_too_large") {
        // Something could not be sent: read the conversation again (a new history frame).
        showError(frame.message);
        page.connection.stop();
        page.connection.start();
        break;
      }
      if (approvals.error(frame)) break;
      if (frame.id && page.forms.has(frame.id)) {
        showElicitationError(page.forms.get(frame.id), frame.message, frame.fields);
      } else {
        if (EDIT_ERRORS.has(frame.code) || frame.code === "turn_in_progress") thread.editFailed();
        if (page.sentText !== null && REFUSALS.has(frame.code)) attacher.restore(); // not an edit's refusal
        if (page.sentText !== null && REFUSALS.has(frame.code)) {
          const text = page.sentText;
          page.sentText = null;
          thread.unhold();
          putBack(text, `${frame.message} Your message is back in the box.`);
          break;
        }
        showError(frame.message);
      }
      break;
    default:
      break; // a newer server: unknown frames are ignored
  }
}

// --- keyboard ----------------------------------------------------------------------------------------------
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented) return;
  if (document.querySelector("dialog[open]") || !document.getElementById("menu").hidden) return;
  if (!document.getElementById("agent-panel").hidden) return;
  if (sidebar.isOpen && sidebar.isDrawer) {
    sidebar.close();
    return;
  }
  if (page.running) {
    event.preventDefault();
    send({ type: "cancel" });
  }
});

window.addEventListener("popstate", () => window.location.reload());

// --- start ----------------------------------------------------------------------------------------------------
setupTheme();
renderAgentCard();
if (agents) agents.refresh().then(() => renderAgentCard());
if (agents) {
  setInterval(() => {
    if (page.conversation === null && !document.hidden) refreshAgentsSoon();
  }, LANDING_POLL_MS);
}
if (models) models.load();
if (page.conversation !== null) connect();
if (window.matchMedia("(min-width: 800px)").matches) composer.focus();
