// Tool call progress: a server's notifications/progress for a running call, shown on its card
// as a bar (<progress> with value/max when the total is known, indeterminate otherwise) and the
// server's message. Frames: `tool_progress` {call_id, progress, total, message} and the
// history frame's `progress` list (docs/protocol.md).
//
// The latest progress of each running call is kept here, so a card re-rendered by a later
// frame shows it again (toolcards.js calls renderProgress at the end of renderCall). A card
// that is no longer running drops its bar: nothing is drawn after the call's result.
// The message is the server's text: inserted with textContent only.

import { el } from "./dom.js";

const latest = new Map(); // call id -> {progress, total, message}

function finite(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function percentText(progress, total) {
  if (total === null) return String(progress);
  const percent = Math.max(0, Math.min(100, Math.round((progress / total) * 100)));
  return `${progress} / ${total} (${percent}%)`;
}

function draw(card, state) {
  let box = card.querySelector(":scope > .tool-progress");
  if (!box) {
    box = el("div", "tool-progress");
    const bar = el("progress", "tool-progress-bar");
    const label = card.querySelector(".tool-name");
    bar.setAttribute("aria-label", `Progress of ${label ? label.textContent : "the tool call"}`);
    box.append(bar, el("span", "tool-progress-text"));
    const head = card.querySelector(":scope > .tool-head");
    if (head) head.after(box);
    else card.append(box);
  }
  const bar = box.querySelector("progress");
  const total = finite(state.total);
  const progress = finite(state.progress) ?? 0;
  if (total !== null && total > 0) {
    bar.max = total;
    bar.value = Math.min(progress, total);
  } else {
    bar.removeAttribute("value"); // indeterminate
    bar.removeAttribute("max");
  }
  const text = box.querySelector(".tool-progress-text");
  const numbers = percentText(progress, total !== null && total > 0 ? total : null);
  text.textContent = state.message ? `${state.message} · ${numbers}` : numbers;
}

function running(card) {
  return card && card.classList.contains("status-running");
}

// A tool_progress frame (or an entry of the history frame's `progress`): remember it and draw
// it on the call's card, if that card is running.
export function showProgress(frame, card) {
  if (!frame || typeof frame.call_id !== "number") return;
  if (card && !running(card)) return; // the result came first: progress is over
  const state = { progress: frame.progress, total: frame.total, message: typeof frame.message === "string" ? frame.message : "" };
  latest.set(frame.call_id, state);
  if (card) draw(card, state);
}

// Called at the end of renderCall: the bar stays on a running card, and goes with the result.
export function renderProgress(card, call) {
  if (call.status !== "running") {
    latest.delete(call.id);
    return;
  }
  const state = latest.get(call.id);
  if (state) draw(card, state);
}

// A new history frame: everything is drawn again from it.
export function clearProgress() {
  latest.clear();
}
