// Small helpers shared by the chat page's modules: building nodes, icons, HTTP, the clipboard,
// counts and times, and the screen-reader announcer.
//
// Text from the model, tools or MCP servers only ever goes in through textContent / Text nodes.

const ICONS = {
  copy: ["M9 9h10v10H9z", "M5 15V5h10"],
  check: ["M5 12l5 5L20 7"],
  edit: ["M4 20h4L19 9l-4-4L4 16v4z", "M13.5 6.5l4 4"],
  refresh: ["M20 11a8 8 0 1 0-2.3 5.7", "M20 4v7h-7"],
  tool: ["M14.7 6.3a4 4 0 0 0-5.4 5.4L4 17l3 3 5.3-5.3a4 4 0 0 0 5.4-5.4l-2.5 2.5-2.5-.5-.5-2.5z"],
  chevron: ["M6 9l6 6 6-6"],
  clip: ["M21 11.5l-8.5 8.5a5 5 0 0 1-7-7L14 4.5a3.5 3.5 0 0 1 5 5L10.5 18a2 2 0 0 1-3-3L15 7.5"],
  agent: ["M12 3a7 7 0 0 0-7 7v10l2.3-1.7L9.6 20l2.4-1.7 2.4 1.7 2.3-1.7L19 20V10a7 7 0 0 0-7-7z"],
};
const SVG = "http://www.w3.org/2000/svg";

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// An error or note line: shows `text`, or hides the node when there is none.
export function showText(node, text) {
  node.textContent = text || "";
  node.hidden = !text;
}

// A decorative icon (the control around it carries the label).
export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  for (const [key, value] of Object.entries({
    class: "icon", viewBox: "0 0 24 24", width: "20", height: "20", "aria-hidden": "true", focusable: "false",
    fill: "none", stroke: "currentColor", "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round",
  })) svg.setAttribute(key, value);
  for (const d of ICONS[name] || []) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

// An icon-only button; `label` is what assistive technology reads (and the tooltip).
export function iconButton(name, label, className) {
  const button = el("button", `icon-button ${className || ""}`.trim());
  button.type = "button";
  button.setAttribute("aria-label", label);
  button.title = label;
  button.append(icon(name));
  return button;
}

function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

async function answer(response) {
  let data = null;
  const type = response.headers.get("content-type") || "";
  if (type.includes("application/json")) data = await response.json();
  if (!response.ok) {
    const reason = data && typeof data.error === "string" ? data.error : `HTTP ${response.status}`;
    throw new Error(reason);
  }
  return { data, response };
}

// POST a form (CSRF token included); resolves to {data (parsed JSON or null), response}.
export async function post(url, fields = {}) {
  const response = await fetch(url, {
    method: "POST",
    body: new URLSearchParams(fields),
    headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
    credentials: "same-origin",
  });
  return answer(response);
}

export async function getJSON(url, signal) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", signal });
  const { data } = await answer(response);
  if (data === null) throw new Error("not JSON");
  return data;
}

// Tell screen-reader users about something that happened away from their focus.
export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  region.textContent = "";
  // A new text node in a later task is announced even when the text repeats.
  setTimeout(() => { region.textContent = text; }, 30);
}

// Copy text; works on plain-HTTP LAN addresses too, where navigator.clipboard is absent.
async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // fall through to the selection-based copy (permission refused)
    }
  }
  const area = el("textarea", "sr-only");
  area.value = text;
  area.setAttribute("readonly", "");
  document.body.append(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch {
    done = false;
  }
  area.remove();
  return done;
}

// A copy button that says "Copied" for a moment; `getText` is read at click time.
export function copyButton(getText, { label = "Copy", withText = false, className = "" } = {}) {
  const button = withText ? el("button", className) : iconButton("copy", label, className);
  button.type = "button";
  if (withText) {
    button.append(icon("copy"), el("span", "copy-label", label));
    button.setAttribute("aria-label", label);
  }
  button.addEventListener("click", async () => {
    const ok = await copyText(getText());
    const said = ok ? "Copied" : "Could not copy";
    announce(said);
    button.classList.add(ok ? "copied" : "copy-failed");
    const labelEl = button.querySelector(".copy-label");
    if (labelEl) labelEl.textContent = said;
    button.title = said;
    setTimeout(() => {
      button.classList.remove("copied", "copy-failed");
      if (labelEl) labelEl.textContent = label;
      button.title = label;
    }, 1500);
  });
  return button;
}

// Short relative numbers for token counts: 950, 1.2k, 34k.
export function formatCount(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "?";
  if (n < 1000) return String(n);
  if (n < 10000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  return `${Math.round(n / 1000)}k`;
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

// The local time of an ISO timestamp as hours and minutes ("" when it is not a date).
export function clockTime(iso) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return "";
  return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// A deadline in words: `${before} <local time> ${after}.` ("" when `iso` is not a date).
export function expiresText(iso, before, after) {
  const time = clockTime(iso);
  return time ? `${before} ${time} ${after}.` : "";
}

// A region that scrolls must be reachable by keyboard (and only then: no useless tab stops).
// Checked again whenever its size changes (a rotated phone, a drawer, more text).
function updateScrollable(node) {
  const scrolls = node.scrollHeight > node.clientHeight + 1 || node.scrollWidth > node.clientWidth + 1;
  if (scrolls && !node.classList.contains("clamped")) node.tabIndex = 0;
  else node.removeAttribute("tabindex");
}

const resized = typeof ResizeObserver === "function"
  ? new ResizeObserver((entries) => {
    for (const { target } of entries) {
      if (target.isConnected) updateScrollable(target);
      else resized.unobserve(target); // gone from the page (a rebuilt list): let it go
    }
  })
  : null;

export function markScrollable(node) {
  if (resized) resized.observe(node); // reports the size once at once, then on every change
  else requestAnimationFrame(() => updateScrollable(node));
}
