// MCP Apps: a tool call's view in a sandboxed frame inside its card, in place of the result (the
// raw result is folded under it: toolcards.js), driven by the official host bridge (`AppBridge` of @modelcontextprotocol/ext-apps, vendored in static/vendor/ext-apps).
// docs/apps.md says what a view may and may not do.
//
// The frame loads the document BooCode serves for the call (`view_url`) with
// sandbox="allow-scripts" only, and that document's own policy says `sandbox allow-scripts` too:
// it runs in an opaque origin, so it cannot read the page, its cookies or its storage, navigate
// the page or open windows. It talks to the page only through postMessage, which the bridge
// accepts only from this frame's window. The page answers `ui/initialize` with the host context
// (theme and its style variables, locale, time zone, display mode, container size), sends the call's arguments once the
// view says it is initialized, then its result (or that it was cancelled), resizes the frame as
// the view asks (within MIN_HEIGHT..MAX_HEIGHT), and opens a link the view asks for only when the
// person clicks it (http and https only, its host shown). Before a frame is removed the view is
// told (`ui/resource-teardown`), with a short wait.
//
// What a view asks of its server (`tools/call`, `resources/read`) and its model context
// (`ui/update-model-context`) go over the conversation's socket as `view_request` frames
// (boocode/chat/web/view_requests.py checks and bounds them); a message it wants to add to the
// conversation (`ui/message`) is shown and sent only when the person clicks Send. Fullscreen
// (`ui/request-display-mode`) is only asked of the person: the card says which server asks, and
// the view fills the window when the person clicks Allow, below BooCode's own bar that names the
// server and leaves (its button, or Escape) — the view's frame never covers it.
//
// Every message from a view's window goes first through `screen` (added before any bridge): past
// MAX_MESSAGES_PER_SECOND they are dropped unread, and a view that goes on is stopped after
// STOP_AFTER_DROPPED; the rest are measured before anything parses them (strings by their length,
// binary data by its byte length: no copy, no JSON), and a view that sends one larger than
// MAX_MESSAGE_BYTES is stopped at once. A stopped view's frame is replaced by a note saying why;
// what it had already queued is dropped unread.

import { el } from "./dom.js";

const BRIDGE_URL = new URL("../vendor/ext-apps/app-bridge.js", import.meta.url).href;
const MIN_HEIGHT = 60;
const MAX_HEIGHT = 800;
const TEARDOWN_WAIT_MS = 500;
const MAX_PENDING_PER_VIEW = 4; // requests of one view waiting for BooCode (the server bounds them too)
const MAX_MESSAGES_PER_SECOND = 200; // from one view; more are dropped before they are parsed
const STOP_AFTER_DROPPED = 2000; // dropped messages after which the view is stopped
const MAX_MESSAGE_CHARS = 16000; // of a message a view proposes
const MAX_MESSAGE_BYTES = 1024 * 1024; // of any message from a view (the socket takes 64 KB frames)
const MAX_MESSAGE_ITEMS = 50_000; // values and keys in one message from a view
const HOST_INFO = { name: "BooCode", version: document.documentElement.dataset.version || "0" };
const HOST_CAPABILITIES = {
  openLinks: {},
  logging: {},
  serverTools: {},
  serverResources: {},
  updateModelContext: { text: {}, structuredContent: {} },
  message: { text: {} },
};

let bridgeModule = null;
const views = new Map(); // call id -> the view's state (see showView)
const sources = new WeakMap(); // a view's window -> its state (kept once stopped: see screen)
const waiting = new Map(); // view_request id -> { resolve, reject, state }
let nextRequest = 1;
// What the page lends the views (set by chat.js): the socket, sending a message, the composer.
let host = { send: () => false, sendMessage: () => false, running: () => false, draft: () => {} };

export function setViewHost(hooks) {
  host = { ...host, ...hooks };
}

// A `view_reply` frame: the answer to one of the views' requests.
export function viewReply(frame) {
  const request = waiting.get(frame.id);
  if (!request) return;
  waiting.delete(frame.id);
  request.state.pending -= 1;
  if (typeof frame.error === "string") request.reject(new Error(frame.error));
  else request.resolve(frame.result ?? {});
}

// The socket dropped: the server cancelled what it was doing for the views; they are told so.
export function viewsDisconnected() {
  for (const [id, request] of waiting) {
    waiting.delete(id);
    request.state.pending -= 1;
    request.reject(new Error("The connection to BooCode was lost; try again."));
  }
}

// One request of a view to BooCode (its server's tools and resources, its model context).
function ask(state, method, params) {
  if (state.pending >= MAX_PENDING_PER_VIEW) {
    return Promise.reject(new Error(`Too many requests from this view at once (at most ${MAX_PENDING_PER_VIEW}).`));
  }
  const id = nextRequest++;
  if (!host.send({ type: "view_request", id, call: state.call.id, method, params: params ?? {} })) {
    return Promise.reject(new Error("BooCode is not connected; try again."));
  }
  state.pending += 1;
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject, state }));
}

function loadBridge() {
  bridgeModule ??= import(BRIDGE_URL);
  return bridgeModule;
}

function theme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

// The spec's style variables (every one of them: views may check that all are there), from the
// page's own colours, radius and fonts, so that a view can look like the page in either theme.
const PAGE_COLOURS = {
  "background-primary": "bg", "background-secondary": "panel-2", "background-tertiary": "hover",
  "background-inverse": "text", "background-info": "accent-soft", "background-danger": "danger-soft",
  "background-success": "panel-2", "background-warning": "warn-soft", "background-disabled": "panel-2",
  "text-primary": "text", "text-secondary": "muted", "text-tertiary": "muted", "text-inverse": "bg",
  "text-ghost": "muted", "text-info": "accent", "text-danger": "danger", "text-success": "ok",
  "text-warning": "warn", "text-disabled": "muted", "border-primary": "border", "border-secondary": "border",
  "border-tertiary": "hover", "border-inverse": "text", "border-info": "accent-line",
  "border-danger": "danger-line", "border-success": "ok", "border-warning": "warn-line",
  "border-disabled": "border", "ring-primary": "focus", "ring-secondary": "accent", "ring-inverse": "bg",
  "ring-info": "accent", "ring-danger": "danger", "ring-success": "ok", "ring-warning": "warn",
};
const SIZES = { xs: "0.75rem", sm: "0.875rem", md: "1rem", lg: "1.125rem" };
const HEADINGS = { xs: "0.875rem", sm: "1rem", md: "1.125rem", lg: "1.25rem", xl: "1.5rem", "2xl": "1.875rem", "3xl": "2.25rem" };

function styleVariables() {
  const page = getComputedStyle(document.documentElement);
  const value = (name) => page.getPropertyValue(`--${name}`).trim();
  const variables = { "--color-background-ghost": "transparent", "--color-border-ghost": "transparent" };
  for (const [key, name] of Object.entries(PAGE_COLOURS)) variables[`--color-${key}`] = value(name);
  variables["--font-sans"] = getComputedStyle(document.body).fontFamily;
  variables["--font-mono"] = 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace';
  Object.assign(variables, {
    "--font-weight-normal": "400", "--font-weight-medium": "500",
    "--font-weight-semibold": "600", "--font-weight-bold": "700",
  });
  for (const [size, rem] of Object.entries(SIZES)) {
    variables[`--font-text-${size}-size`] = rem;
    variables[`--font-text-${size}-line-height`] = "1.5";
  }
  for (const [size, rem] of Object.entries(HEADINGS)) {
    variables[`--font-heading-${size}-size`] = rem;
    variables[`--font-heading-${size}-line-height`] = "1.25";
  }
  const radius = value("radius") || "10px";
  Object.assign(variables, {
    "--border-radius-xs": "2px", "--border-radius-sm": "6px", "--border-radius-md": radius,
    "--border-radius-lg": "14px", "--border-radius-xl": "20px", "--border-radius-full": "9999px",
    "--border-width-regular": "1px", "--shadow-hairline": `0 0 0 1px ${value("border")}`,
    "--shadow-sm": "0 1px 3px rgb(20 20 40 / 0.1)", "--shadow-md": value("shadow"),
    "--shadow-lg": "0 12px 40px rgb(20 20 40 / 0.2)",
  });
  return variables;
}

function hostContext(frame, mode = "inline") {
  const box = frame.getBoundingClientRect(); // (filling the window: the space below BooCode's bar)
  const container =
    mode === "fullscreen"
      ? { width: Math.round(box.width) || innerWidth, height: Math.round(box.height) || innerHeight }
      : { width: Math.round(box.width) || 300, maxHeight: MAX_HEIGHT };
  return {
    theme: theme(),
    styles: { variables: styleVariables() },
    displayMode: mode,
    availableDisplayModes: ["inline", "fullscreen"],
    containerDimensions: container,
    locale: navigator.language,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    platform: matchMedia("(pointer: coarse)").matches ? "mobile" : "web",
    deviceCapabilities: { touch: matchMedia("(pointer: coarse)").matches, hover: matchMedia("(hover: hover)").matches },
  };
}

// The call's result as MCP's CallToolResult: its text, its images and its structured content.
function toolResult(call) {
  const content = [];
  if (call.output) content.push({ type: "text", text: call.output });
  for (const url of call.images || []) {
    const match = /^data:(image\/[a-z]+);base64,(.*)$/.exec(url);
    if (match) content.push({ type: "image", mimeType: match[1], data: match[2] });
  }
  const result = { content, isError: Boolean(call.is_error) };
  if (call.structured !== null && call.structured !== undefined) result.structuredContent = call.structured;
  return result;
}

function parsedArguments(call) {
  try {
    const value = JSON.parse(call.arguments || "{}");
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

// A link the view asks to open: shown in the view's box, opened only by the person's click.
function offerLink(state, url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return Promise.reject(new Error("Invalid URL"));
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return Promise.reject(new Error("Only http and https links are opened"));
  }
  state.linkOffer?.remove();
  const offer = el("p", "app-view-link");
  const open = el("a", null, `Open ${parsed.host}`);
  open.href = parsed.href;
  open.target = "_blank";
  open.rel = "noopener noreferrer";
  open.title = parsed.href;
  const dismiss = el("button", "secondary", "Dismiss");
  dismiss.type = "button";
  offer.append(el("span", null, "The view asks to open a page: "), open, dismiss);
  state.node.append(offer);
  state.linkOffer = offer;
  return new Promise((resolve, reject) => {
    open.addEventListener("click", () => {
      offer.remove();
      resolve({});
    });
    dismiss.addEventListener("click", () => {
      offer.remove();
      reject(new Error("Link opening denied by user"));
    });
  });
}

// A message the view proposes for the conversation: shown, sent only when the person clicks Send.
function offerMessage(state, { content }) {
  const text = (Array.isArray(content) ? content : [])
    .filter((block) => block && block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join("\n\n")
    .trim();
  if (!text) return Promise.reject(new Error("Only text messages are accepted"));
  if (text.length > MAX_MESSAGE_CHARS) return Promise.reject(new Error(`Messages are limited to ${MAX_MESSAGE_CHARS} characters`));
  state.messageOffer?.remove();
  const offer = el("div", "app-view-offer");
  const quote = el("blockquote", "app-view-quote", text); // text, never HTML
  const actions = el("p", "app-view-actions");
  const sendButton = el("button", null, "Send");
  const dismiss = el("button", "secondary", "Dismiss");
  sendButton.type = dismiss.type = "button";
  actions.append(sendButton, dismiss);
  offer.append(el("p", null, "The view asks to send this message:"), quote, actions);
  state.node.append(offer);
  state.messageOffer = offer;
  return new Promise((resolve) => {
    sendButton.addEventListener("click", () => {
      offer.remove();
      if (host.running()) {
        host.draft(text); // nothing is lost: in the composer, to send once the turn ends
        resolve({ isError: true });
      } else {
        resolve(host.sendMessage(text) ? {} : { isError: true });
      }
    });
    dismiss.addEventListener("click", () => {
      offer.remove();
      resolve({ isError: true });
    });
  });
}

// The view asks to fill the window: the card asks the person, naming the server; only their click
// switches. The view's request waits for the answer (Dismiss: it stays inline); a new request
// replaces one not answered yet. Back inline is granted at once.
function requestDisplayMode(state, mode) {
  if (mode !== "fullscreen" || state.mode === "fullscreen") return setDisplayMode(state, mode);
  state.askFullscreen?.(false);
  const offer = el("div", "app-view-ask");
  offer.setAttribute("role", "group");
  offer.setAttribute("aria-label", "Fill the window?");
  const allow = el("button", null, "Allow");
  const dismiss = el("button", "secondary", "Dismiss");
  allow.type = dismiss.type = "button";
  const text = el("span", "app-view-ask-text");
  text.append(el("strong", null, serverName(state)), " asks to fill the window");
  const actions = el("span", "app-view-ask-actions");
  actions.append(allow, dismiss);
  offer.append(text, actions);
  state.frame.before(offer);
  return new Promise((resolve) => {
    const answer = (granted) => {
      offer.remove();
      state.askFullscreen = null;
      resolve(granted ? setDisplayMode(state, "fullscreen") : { mode: state.mode });
    };
    state.askFullscreen = answer;
    allow.addEventListener("click", (event) => answer(event.isTrusted));
    dismiss.addEventListener("click", () => answer(false));
  });
}

function serverName(state) {
  return state.call.server || "This tool's server";
}

// Inline, or filling the window below BooCode's bar (the server's name, a way out).
function setDisplayMode(state, mode) {
  const next = mode === "fullscreen" ? "fullscreen" : "inline";
  if (next === state.mode) return { mode: next };
  state.mode = next;
  state.node.classList.toggle("app-view-fullscreen", next === "fullscreen");
  if (next === "fullscreen") {
    const bar = el("div", "app-view-bar");
    bar.setAttribute("role", "region");
    bar.setAttribute("aria-label", "Full window view");
    const leave = el("button", "app-view-leave", "Exit full screen");
    leave.type = "button";
    leave.title = "Exit full screen (Escape)";
    leave.addEventListener("click", () => setDisplayMode(state, "inline"));
    const label = el("span", "app-view-bar-label");
    const whose = el("span", "app-view-bar-note", "below is its view, not BooCode");
    label.append(el("strong", null, serverName(state)), " fills the window ", whose);
    bar.append(label, leave);
    state.node.prepend(bar);
    state.bar = bar;
    // Escape leaves the full window first (captured, and marked handled: a running turn is not
    // stopped by the same key).
    state.escape = (event) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      event.preventDefault();
      setDisplayMode(state, "inline");
    };
    addEventListener("keydown", state.escape, true);
    leave.focus();
  } else {
    state.bar?.remove();
    state.bar = null;
    removeEventListener("keydown", state.escape, true);
    state.escape = null;
  }
  if (!state.stopped) state.bridge?.setHostContext(hostContext(state.frame, next));
  return { mode: next };
}

// What a message from a view weighs, counted up to `limit` (then it stops): strings by their
// length, binary data by its byte length, 8 for anything else, keys too; Infinity past
// MAX_MESSAGE_ITEMS values. Nothing is copied or serialized.
function measure(value, limit) {
  let size = 0;
  let items = 0;
  const stack = [value];
  const seen = new Set();
  while (stack.length && size <= limit) {
    const item = stack.pop();
    items += 1;
    if (items > MAX_MESSAGE_ITEMS) return Infinity;
    if (typeof item === "string") size += item.length;
    else if (item === null || typeof item !== "object") size += 8;
    else if (!seen.has(item)) {
      seen.add(item);
      if (item instanceof ArrayBuffer || ArrayBuffer.isView(item)) size += item.byteLength;
      else if (item instanceof Blob) size += item.size;
      else if (item instanceof Map || item instanceof Set) {
        items += item.size;
        if (items > MAX_MESSAGE_ITEMS) return Infinity;
        for (const entry of item) stack.push(entry);
      } else {
        const keys = Object.keys(item);
        items += keys.length;
        if (items > MAX_MESSAGE_ITEMS) return Infinity;
        for (const key of keys) {
          size += key.length;
          stack.push(item[key]);
        }
      }
    }
  }
  return size;
}

// The first listener of every message to the page (see the top of this file).
function screen(event) {
  const state = sources.get(event.source);
  if (!state) return;
  if (state.stopped) {
    event.stopImmediatePropagation();
    return;
  }
  const now = Math.floor(performance.now() / 1000);
  if (now !== state.second) {
    state.second = now;
    state.count = 0;
  }
  state.count += 1;
  if (state.count > MAX_MESSAGES_PER_SECOND) {
    event.stopImmediatePropagation();
    state.dropped += 1;
    if (state.dropped === STOP_AFTER_DROPPED) stopView(state, "The view sent too many messages and was stopped.");
    return;
  }
  if (measure(event.data, MAX_MESSAGE_BYTES) > MAX_MESSAGE_BYTES) {
    event.stopImmediatePropagation();
    const limit = `${MAX_MESSAGE_BYTES / (1024 * 1024)} MB`;
    stopView(state, `The view sent a message larger than ${limit} and was stopped.`);
  }
}
addEventListener("message", screen);

function stopView(state, why) {
  state.stopped = true;
  setDisplayMode(state, "inline");
  state.askFullscreen?.(false);
  state.bridge?.close?.();
  state.frame.remove();
  state.node.append(el("p", "note app-view-stopped", why));
}

async function connect(state) {
  const { AppBridge, PostMessageTransport } = await loadBridge();
  const { frame } = state;
  const bridge = new AppBridge(null, HOST_INFO, HOST_CAPABILITIES, { hostContext: hostContext(frame) });
  bridge.oninitialized = () => {
    state.initialized = true;
    deliver(state);
  };
  bridge.onsizechange = ({ height }) => {
    if (typeof height === "number" && Number.isFinite(height)) {
      frame.style.height = `${Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(height)))}px`;
    }
  };
  bridge.onopenlink = ({ url }) => offerLink(state, String(url));
  bridge.onloggingmessage = () => {}; // accepted (the capability says so), kept nowhere
  bridge.oncalltool = (params) => ask(state, "tools/call", { name: params.name, arguments: params.arguments ?? {} });
  bridge.onreadresource = (params) => ask(state, "resources/read", { uri: params.uri });
  bridge.onupdatemodelcontext = (params) => ask(state, "ui/update-model-context", params);
  bridge.onmessage = (params) => offerMessage(state, params);
  bridge.onrequestdisplaymode = ({ mode }) => requestDisplayMode(state, mode);
  state.bridge = bridge;
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
}

// What the view has not been told yet: the arguments, then the result or the cancellation.
function deliver(state) {
  const { bridge, call } = state;
  if (!bridge || !state.initialized) return;
  if (!state.sentInput) {
    state.sentInput = true;
    bridge.sendToolInput({ arguments: parsedArguments(call) });
  }
  if (state.sentEnd || call.status === "running") return;
  state.sentEnd = true;
  if (call.status === "cancelled" || call.status === "skipped") {
    bridge.sendToolCancelled({ reason: call.output || call.status });
  } else {
    bridge.sendToolResult(toolResult(call));
  }
}

// Show the view of `call` (a frame in `card`, after its arguments and steps, before the raw
// result), or bring what it shows up to date. The card keeps the node where it is when it is
// rendered again (toolcards.js).
export function showView(card, call) {
  if (!call.view_url) return;
  let state = views.get(call.id);
  if (state && state.node.isConnected) {
    state.call = call;
    deliver(state);
    return;
  }
  const node = el("div", "app-view");
  node.dataset.callId = call.id;
  const frame = el("iframe", "app-view-frame");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.title = `View of ${call.title || call.tool || call.name}`;
  frame.style.height = `${MIN_HEIGHT * 2}px`;
  node.append(frame);
  const result = card.querySelector(":scope > .tool-raw, :scope > .tool-result");
  if (result) result.before(node);
  else card.append(node);
  state = {
    node,
    frame,
    call,
    bridge: null,
    initialized: false,
    sentInput: false,
    sentEnd: false,
    linkOffer: null,
    messageOffer: null,
    mode: "inline",
    bar: null,
    escape: null,
    askFullscreen: null,
    pending: 0,
    second: 0,
    count: 0,
    dropped: 0,
    stopped: false,
  };
  views.set(call.id, state);
  sources.set(frame.contentWindow, state);
  // The bridge listens before the document loads (the frame's window stays the same object when
  // it navigates), so the view's first message is not missed.
  connect(state)
    .then(() => {
      if (views.get(call.id) === state) frame.src = call.view_url;
    })
    .catch((error) => {
      node.append(el("p", "note", `The view could not be connected (${error.message}).`));
    });
}

// Tell the view it goes, wait a little for its answer, then remove its frame.
export async function removeView(callId) {
  const state = views.get(callId);
  if (!state) return;
  views.delete(callId);
  if (state.bridge && state.initialized) {
    await Promise.race([
      state.bridge.teardownResource({ reason: "removed" }).catch(() => null),
      new Promise((resolve) => setTimeout(resolve, TEARDOWN_WAIT_MS)),
    ]);
  }
  state.stopped = true; // (what it had queued is dropped unread)
  setDisplayMode(state, "inline");
  state.bridge?.close?.();
  state.node.remove();
}

// The page's theme changed (its switch, or the system's while it follows it): every view is told.
function themeChanged() {
  for (const state of views.values()) {
    if (state.bridge && state.initialized) state.bridge.setHostContext(hostContext(state.frame, state.mode));
  }
}
new MutationObserver(themeChanged).observe(document.documentElement, { attributeFilter: ["data-theme"] });
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", themeChanged);

// Leaving the page: every view is told (it cannot be waited for).
addEventListener("pagehide", () => {
  for (const state of views.values()) {
    if (state.bridge && state.initialized) state.bridge.teardownResource({ reason: "page left" }).catch(() => null);
  }
});
