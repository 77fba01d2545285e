// MCP Apps: a tool call's view in a sandboxed frame below its card, driven by the official host
// bridge (`AppBridge` of @modelcontextprotocol/ext-apps, vendored in static/vendor/ext-apps).
// docs/apps.md says what a view may and may not do.
//
// The frame loads the document BooCode serves for the call (`view_url`) with
// sandbox="allow-scripts" only, and that document's own policy says `sandbox allow-scripts` too:
// it runs in an opaque origin, so it cannot read the page, its cookies or its storage, navigate
// the page or open windows. It talks to the page only through postMessage, which the bridge
// accepts only from this frame's window. The page answers `ui/initialize` with the host context
// (theme, locale, time zone, display mode, container size), sends the call's arguments once the
// view says it is initialized, then its result (or that it was cancelled), resizes the frame as
// the view asks (within MIN_HEIGHT..MAX_HEIGHT), and opens a link the view asks for only when the
// person clicks it (http and https only, its host shown). Before a frame is removed the view is
// told (`ui/resource-teardown`), with a short wait.

import { el } from "./dom.js";

const BRIDGE_URL = new URL("../vendor/ext-apps/app-bridge.js", import.meta.url).href;
const MIN_HEIGHT = 60;
const MAX_HEIGHT = 800;
const TEARDOWN_WAIT_MS = 500;
const HOST_INFO = { name: "BooCode", version: document.documentElement.dataset.version || "0" };

let bridgeModule = null;
const views = new Map(); // call id -> the view's state (see showView)

function loadBridge() {
  bridgeModule ??= import(BRIDGE_URL);
  return bridgeModule;
}

function theme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function hostContext(frame) {
  return {
    theme: theme(),
    displayMode: "inline",
    availableDisplayModes: ["inline"],
    containerDimensions: { width: Math.round(frame.getBoundingClientRect().width) || 300, maxHeight: MAX_HEIGHT },
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

async function connect(state) {
  const { AppBridge, PostMessageTransport } = await loadBridge();
  const { frame } = state;
  const bridge = new AppBridge(null, HOST_INFO, { openLinks: {}, logging: {} }, { hostContext: hostContext(frame) });
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

// Show the view of `call` (a frame after `card`), or bring what it shows up to date.
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
  card.after(node);
  state = { node, frame, call, bridge: null, initialized: false, sentInput: false, sentEnd: false, linkOffer: null };
  views.set(call.id, state);
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
  state.bridge?.close?.();
  state.node.remove();
}

// Leaving the page: every view is told (it cannot be waited for).
addEventListener("pagehide", () => {
  for (const state of views.values()) {
    if (state.bridge && state.initialized) state.bridge.teardownResource({ reason: "page left" }).catch(() => null);
  }
});
