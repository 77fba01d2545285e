// Tool cards: which server and tool, the arguments, a readable preview of the result shown
// without a click (first lines; structured content as a table or tree; images inline), "Show all"
// for long output (fetching the whole stored output when the preview was cut), the duration and
// the error state. Calls of one step (one assistant message) sit together in one group.
//
// What happened during the call sits inside its card in the order it happened: the arguments,
// then its steps (the approval it waited for, the forms its server asked; `addStep`), then the
// result. While a step waits for the person the badge says so instead of "running".
//
// A call with an MCP Apps view (appviews.js) shows the view inside its card, in place of the
// result: the view stands for it, and the raw result (text, tables, tree) is folded under it in a
// <details> closed by default ("Raw result"), as long as the call succeeded. The view's node is
// never taken out of the card when the card is rendered again (a frame moved in the document
// loads its page again), nor are the steps (a form keeps the focus and what is typed into it):
// the card's other parts are drawn around them, and the control that had the focus (Show all)
// gets it back in the redrawn part.
//
// Everything from the tool or the model is inserted as text; images only as data: URLs of
// raster types.

import { el, formatDuration, icon, markScrollable } from "./dom.js";
import { renderProgress } from "./progress.js";
import { resourceLinks } from "./resources.js";
import { renderStructured } from "./structured.js";

const IMAGE_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const PREVIEW_LINES = 10;
const PREVIEW_CHARS = 1200;
const STATUS_WORDS = { running: "running", done: "done", error: "error", cancelled: "cancelled", skipped: "skipped" };

// UI state that survives re-rendering a card (each frame about the call re-renders it).
const views = new WeakMap();

function view(card) {
  let state = views.get(card);
  if (!state) {
    state = { argsOpen: false, expanded: false, fullText: null, loading: false, error: "", showText: false, rawOpen: false };
    views.set(card, state);
  }
  return state;
}

// The name people read: the tool's title, else its own name; the server apart.
function toolLabel(call) {
  return { server: call.server || "", name: call.title || call.tool || call.name, full: call.name };
}

function prettyJson(text) {
  const trimmed = (text || "").trim();
  if (!trimmed || !"[{".includes(trimmed[0]) || trimmed.length > 200000) return null;
  try {
    return JSON.parse(trimmed);
  } catch {
    return null;
  }
}

function inlineArguments(text) {
  const parsed = prettyJson(text);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return text || "{}";
  const parts = Object.entries(parsed).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
  return parts.length ? parts.join(", ") : "no arguments";
}

function outputText(call, state) {
  return state.fullText !== null ? state.fullText : call.output || "";
}

function isLong(call, text) {
  return call.output_truncated || text.split("\n").length > PREVIEW_LINES || text.length > PREVIEW_CHARS;
}

async function fetchFull(card, call, urls, rerender) {
  const state = view(card);
  state.loading = true;
  state.error = "";
  rerender();
  try {
    const response = await fetch(call.output_url || urls.output(call.id), { credentials: "same-origin" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    state.fullText = await response.text();
    state.expanded = true;
  } catch (error) {
    state.error = `Could not load the full output (${error.message}).`;
  } finally {
    state.loading = false;
    rerender();
  }
}

// What of the structured content is worth a table or a tree. Tools that return a plain value
// often wrap it as {"result": value}: a string there is just the text again.
function structuredView(call) {
  let value = call.structured;
  if (value === null || value === undefined) return undefined;
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "result") value = value.result;
  }
  if (value === null || typeof value !== "object") return undefined;
  return value;
}

function sameJson(text, value) {
  const parsed = prettyJson(text);
  return parsed !== null && JSON.stringify(parsed) === JSON.stringify(value);
}

function renderResult(card, call, urls, rerender) {
  const state = view(card);
  const result = el("div", "tool-result");
  const structured = structuredView(call);
  const hasStructured = structured !== undefined;
  if (hasStructured) {
    const view = renderStructured(structured);
    result.append(view);
    for (const box of [view, ...view.querySelectorAll(".structured")]) markScrollable(box);
  }

  const text = outputText(call, state);
  const parsed = hasStructured ? null : prettyJson(text);
  const shown = parsed !== null && typeof parsed === "object" ? JSON.stringify(parsed, null, 2) : text;
  const long = isLong(call, shown);
  const pre = el("pre", "tool-output", shown);
  const showPre = !hasStructured || state.showText;
  pre.hidden = !showPre || shown === "";
  if (long && !state.expanded) pre.classList.add("clamped");
  result.append(pre);
  markScrollable(pre);
  if (!text && !hasStructured && !(call.images || []).length && call.status === "done") {
    result.append(el("p", "note", "No output."));
  }

  const more = el("div", "tool-more");
  if (hasStructured && text && !sameJson(text, call.structured) && !sameJson(text, structured)) {
    const toggle = el("button", "toggle-text", state.showText ? "Hide text" : "Show text");
    toggle.type = "button";
    toggle.setAttribute("aria-expanded", String(state.showText));
    toggle.addEventListener("click", () => {
      state.showText = !state.showText;
      rerender();
    });
    more.append(toggle);
  }
  if (long && showPre && shown) {
    const button = el("button", "show-all");
    button.type = "button";
    if (state.loading) {
      button.textContent = "Loading…";
      button.disabled = true;
    } else if (state.expanded) {
      button.textContent = "Show less";
    } else if (call.output_truncated && state.fullText === null) {
      button.textContent = `Show all (${call.output_length.toLocaleString()} characters)`;
    } else {
      button.textContent = `Show all (${shown.split("\n").length} lines)`;
    }
    button.setAttribute("aria-expanded", String(state.expanded));
    button.addEventListener("click", () => {
      if (state.expanded) {
        state.expanded = false;
        rerender();
        card.scrollIntoView({ block: "nearest" });
      } else if (call.output_truncated && state.fullText === null) {
        fetchFull(card, call, urls, rerender);
      } else {
        state.expanded = true;
        rerender();
      }
    });
    more.append(button);
  }
  if (call.output_truncated) {
    const link = el("a", "full-output", "Open the full output");
    link.href = call.output_url || urls.output(call.id);
    link.target = "_blank";
    link.rel = "noopener";
    more.append(link);
  }
  if (more.childElementCount) result.append(more);
  if (state.error) result.append(el("p", "note", state.error));

  for (const src of call.images || []) {
    if (typeof src === "string" && IMAGE_URL.test(src)) {
      const img = el("img", "tool-image");
      img.alt = `Image returned by ${toolLabel(call).name}`;
      img.src = src;
      img.loading = "lazy";
      result.append(img);
    }
  }
  if (call.images_left_out) {
    result.append(el("p", "note", `${call.images_left_out} image(s) not shown (type not allowed or too large).`));
  }
  result.append(...resourceLinks(call)); // resources.js: links that open the viewer
  return result;
}

// Fill `card` (a div.tool-card) from a tool call object; safe to call again with newer frames.
export function renderCall(card, call, urls) {
  const state = view(card);
  const rerender = () => {
    const fresh = card.querySelector(".tool-args");
    state.argsOpen = fresh ? fresh.open : state.argsOpen;
    renderCall(card, call, urls);
  };
  const argsEl = card.querySelector(".tool-args");
  if (argsEl) state.argsOpen = argsEl.open;

  const label = toolLabel(call);
  // The steps (a form being filled in, an approval) and the view stay where they are, untouched:
  // a node taken out of the document loses the focus and what it is being typed into (see the top).
  const kept = new Set(card.querySelectorAll(":scope > .call-step, :scope > .app-view"));
  const raw = card.querySelector(":scope > .tool-raw");
  if (raw) state.rawOpen = raw.open;
  const focused = focusedPart(card, kept);
  for (const child of [...card.children]) if (!kept.has(child)) child.remove();
  card.className = `tool-card status-${call.status}${call.is_error ? " is-error" : ""}`;
  card.dataset.id = call.id;
  card.setAttribute("role", "group");
  card.setAttribute("aria-label", `Tool call: ${label.server ? `${label.server} ` : ""}${label.name}, ${call.status}`);

  const head = el("div", "tool-head");
  head.append(icon("tool"));
  if (label.server) head.append(el("span", "tool-server", label.server));
  const name = el("span", "tool-name", label.name);
  if (label.full !== label.name) name.title = label.full;
  head.append(name);
  const meta = el("span", "tool-meta");
  meta.append(el("span", "badge tool-status", STATUS_WORDS[call.status] || call.status));
  if (call.duration_ms !== null && call.duration_ms !== undefined) {
    meta.append(el("span", "duration", formatDuration(call.duration_ms)));
  }
  head.append(meta);

  const args = el("details", "tool-args");
  const summary = el("summary");
  summary.append(el("span", null, "Arguments"), el("code", "args-inline", inlineArguments(call.arguments)));
  const parsedArgs = prettyJson(call.arguments);
  const argsPre = el("pre", "tool-arguments", parsedArgs !== null ? JSON.stringify(parsedArgs, null, 2) : call.arguments || "{}");
  args.append(summary, argsPre);
  args.open = state.argsOpen;
  args.addEventListener("toggle", () => {
    state.argsOpen = args.open;
    if (args.open) markScrollable(argsPre);
  });
  card.prepend(head, args); // before the steps and the view
  showWaiting(card);

  if (call.status !== "running") {
    const result = renderResult(card, call, urls, rerender);
    card.append(foldsUnderView(call) ? rawResult(result, state) : result);
  }
  renderProgress(card, call); // the bar of a running call (progress.js)
  if (focused) refocus(card, focused);
}

// The control of the card's drawn parts that has the focus (Show all, Arguments), as a selector
// and its rank among its likes, so that the same control of the redrawn card takes it back.
function focusedPart(card, kept) {
  const active = document.activeElement;
  if (!active || active === card || !card.contains(active)) return null;
  if ([...kept].some((node) => node.contains(active))) return null; // not redrawn: keeps it
  const kind = active.classList[0]; // what the control is (a state class such as "clamped" comes later)
  const selector = kind ? `${active.localName}.${CSS.escape(kind)}` : active.localName;
  return { selector, index: [...card.querySelectorAll(selector)].indexOf(active) };
}

function refocus(card, { selector, index }) {
  const twin = card.querySelectorAll(selector)[Math.max(index, 0)];
  if (twin && twin !== document.activeElement) twin.focus({ preventScroll: true });
}

// A call whose view shows its result: the raw result is folded under the view. An error, a
// cancelled or skipped call stays open: its few words are the news.
function foldsUnderView(call) {
  return Boolean(call.view_url) && call.status === "done" && !call.is_error;
}

function rawResult(result, state) {
  const raw = el("details", "tool-raw");
  const summary = el("summary", null, "Raw result");
  raw.append(summary, result);
  raw.open = state.rawOpen;
  raw.addEventListener("toggle", () => {
    state.rawOpen = raw.open;
  });
  return raw;
}

// Put `node` (an approval card, a form) into the call's card after its earlier steps, before the
// result: the order things happened in.
export function addStep(card, node) {
  node.classList.add("call-step");
  const steps = card.querySelectorAll(":scope > .call-step");
  const after = steps.length ? steps[steps.length - 1] : card.querySelector(":scope > .tool-args");
  if (after) after.after(node);
  else card.append(node);
  showWaiting(card);
}

// A running call whose approval or form waits for the person says so in its badge.
export function showWaiting(card) {
  const badge = card.querySelector(":scope > .tool-head .tool-status");
  if (!badge || !card.classList.contains("status-running")) return;
  const waiting = card.querySelector(":scope > .call-step.approval:not(.decided)")
    ? "waiting for your approval"
    : card.querySelector(":scope > .call-step.elicitation") ? "waiting for your answer" : "";
  badge.textContent = waiting || STATUS_WORDS.running;
  badge.classList.toggle("waiting", Boolean(waiting));
}
