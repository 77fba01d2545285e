// The model's window on the page (docs/models.md): the context meter in the status line (the
// tokens the model's server counted for the last answer against the window, in the warning
// colour past the share where compaction starts) and a divider in the thread after the last
// message each summary stands for, the summary one click away (a <details>). Summaries are the
// model's text: shown as text only.

import { el, formatCount } from "./dom.js";

// The meter: `context` is the conversation frame's `context` ({used, window, source, compact_percent, near}).
export function showContext(node, context) {
  if (!node) return;
  if (!context || typeof context.window !== "number" || typeof context.used !== "number") {
    node.hidden = true;
    node.replaceChildren();
    return;
  }
  const limit = context.near || (context.window * (context.compact_percent || 80)) / 100;
  const near = context.used >= limit;
  const meter = el("meter");
  meter.min = 0;
  meter.max = context.window;
  meter.value = Math.min(context.used, context.window);
  meter.low = limit - 1;
  meter.high = limit;
  meter.optimum = 0;
  meter.setAttribute("aria-label", "Context window used by the last answer");
  const text = el("span", "context-text", `context: ${formatCount(context.used)} / ${formatCount(context.window)}`);
  node.title =
    `The last answer's request and answer took ${context.used} of the model's ${context.window} tokens ` +
    `(the window from ${context.source}); past ${context.compact_percent}% the earlier messages are summarised.`;
  node.classList.toggle("near", near);
  node.replaceChildren(meter, text);
  node.hidden = false;
}

// The dividers: one per summary, after message `up_to` (when that part of the thread is shown).
export function showSummaries(container, summaries) {
  for (const summary of summaries || []) {
    const id = `context-summary-${summary.id}`;
    if (document.getElementById(id)) continue;
    const after = [...container.querySelectorAll(":scope > .message")];
    const next = after.find((node) => Number(node.dataset.id) > summary.up_to);
    const covered = after.some((node) => Number(node.dataset.id) <= summary.up_to);
    if (!covered) continue; // the summarised messages are not on the page (an older page)
    const divider = el("details", "context-divider");
    divider.id = id;
    const label = `${formatCount(summary.messages)} earlier message${summary.messages === 1 ? "" : "s"} summarised for the model`;
    const heading = el("summary", "context-divider-label", label);
    const text = el("p", "context-divider-text", summary.text);
    divider.append(heading, text);
    if (next) container.insertBefore(divider, next);
    else container.append(divider);
  }
}
