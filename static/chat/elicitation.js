// What an MCP server asks for during a tool call (elicitation), as in docs/protocol.md: a form,
// or a web page to open (URL mode).
//
// The server's message, titles, descriptions, choices and URL are untrusted text: they are only
// ever inserted with textContent / value, never as HTML. One input per field: text (or email,
// url, date, date-time), number, checkbox for booleans, select for a single choice,
// checkboxes for a multi-select; defaults pre-filled, required fields marked.
//
// A link is shown in full as text (its host apart), never as a clickable link; only the Open
// button opens it, in a new tab without opener or referrer, and only for http(s) URLs. Nothing
// is fetched or opened before that click.

import { el, expiresText, showText } from "./dom.js";

const OUTCOMES = {
  accepted: "You accepted.",
  declined: "You declined.",
  cancelled: "You cancelled.",
  expired: "No answer in time: declined.",
  stopped: "Cancelled: the turn was stopped.",
  withdrawn: "Withdrawn: the tool call ended.",
};
const LINK_OUTCOMES = {
  completed: "Completed: the server reported that you finished.",
  done: "You said you finished on the page.",
  declined: "You declined to open the page.",
  cancelled: "You cancelled.",
  expired: "No answer in time: declined.",
  stopped: "Cancelled: the turn was stopped.",
  withdrawn: "Closed: the tool call ended.",
};
const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

let uniqueId = 0;

function fieldId() {
  uniqueId += 1;
  return `elicitation-field-${uniqueId}`;
}

function titleOf(field, id) {
  const label = el("label", "field-title", field.title || field.name);
  if (id) label.htmlFor = id;
  if (field.required) {
    const mark = el("span", "required-mark", " *");
    mark.title = "required";
    label.append(mark);
  }
  return label;
}

function textInput(field) {
  const input = el("input");
  input.type = INPUT_TYPES[field.format] || "text";
  if (field.min_length !== null && field.min_length !== undefined) input.minLength = field.min_length;
  if (field.max_length !== null && field.max_length !== undefined) input.maxLength = field.max_length;
  if (typeof field.default === "string") {
    input.value = field.format === "date-time" ? field.default.slice(0, 16) : field.default;
  }
  return input;
}

function numberInput(field) {
  const input = el("input");
  input.type = "number";
  input.step = field.type === "integer" ? "1" : "any";
  if (field.minimum !== null && field.minimum !== undefined) input.min = String(field.minimum);
  if (field.maximum !== null && field.maximum !== undefined) input.max = String(field.maximum);
  if (typeof field.default === "number") input.value = String(field.default);
  return input;
}

function selectInput(field) {
  const select = el("select");
  if (!field.required || field.default === null || field.default === undefined) {
    select.append(el("option", null, "—"));
    select.options[0].value = "";
  }
  for (const option of field.options || []) {
    const item = el("option", null, option.title || option.value);
    item.value = option.value;
    if (option.value === field.default) item.selected = true;
    select.append(item);
  }
  return select;
}

function renderField(field) {
  const row = el("div", `elicitation-field field-${field.type}`);
  row.dataset.name = field.name;
  row.dataset.type = field.type;
  if (field.type === "boolean") {
    const id = fieldId();
    const box = el("input");
    box.type = "checkbox";
    box.id = id;
    box.checked = field.default === true;
    row.append(box, titleOf(field, id));
  } else if (field.type === "multi") {
    const group = el("fieldset", "field-choices");
    const legend = el("legend");
    legend.append(titleOf(field, null));
    group.append(legend);
    const chosen = Array.isArray(field.default) ? field.default : [];
    for (const option of field.options || []) {
      const id = fieldId();
      const box = el("input");
      box.type = "checkbox";
      box.id = id;
      box.value = option.value;
      box.checked = chosen.includes(option.value);
      const label = el("label", null, option.title || option.value);
      label.htmlFor = id;
      const choice = el("span", "choice");
      choice.append(box, label);
      group.append(choice);
    }
    row.append(group);
  } else {
    const id = fieldId();
    let input;
    if (field.type === "enum") input = selectInput(field);
    else if (field.type === "integer" || field.type === "number") input = numberInput(field);
    else input = textInput(field);
    input.id = id;
    input.name = field.name;
    if (field.required) input.setAttribute("aria-required", "true");
    row.append(titleOf(field, id), input);
  }
  if (field.description) row.append(el("div", "field-description", field.description));
  return row;
}

function readField(row) {
  const type = row.dataset.type;
  if (type === "boolean") return row.querySelector("input").checked;
  if (type === "multi") {
    const values = [...row.querySelectorAll("input:checked")].map((box) => box.value);
    return values.length ? values : undefined;
  }
  const control = row.querySelector("input, select");
  const raw = control.value;
  if (raw === "") return undefined; // left empty: the server applies the default, if any
  if (type === "integer" || type === "number") {
    const number = Number(raw);
    return Number.isFinite(number) ? number : raw; // the server names what is wrong
  }
  return raw;
}

function readContent(formEl) {
  const content = {};
  for (const row of formEl.querySelectorAll(".elicitation-field")) {
    const value = readField(row);
    if (value !== undefined) content[row.dataset.name] = value;
  }
  return content;
}

// The URL as the browser reads it, when it may be opened (http or https), else null. The site
// shown and the page opened both come from this one object: what the person reads is where
// Open goes, whatever another parser would make of the text.
function destination(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed : null;
  } catch {
    return null;
  }
}

function openInNewTab(target) {
  if (target) window.open(target.href, "_blank", "noopener,noreferrer");
  return Boolean(target);
}

function button(className, text) {
  const node = el("button", className, text);
  node.type = "button";
  return node;
}

// A web page the server asks the person to open (URL mode).
function renderLink(elicitation, send) {
  const box = el("section", "elicitation elicitation-link");
  box.dataset.id = elicitation.id;
  box.dataset.server = elicitation.server || "";
  box.setAttribute("aria-label", "A web page to open");
  const who = elicitation.server || elicitation.tool;
  box.append(el("p", "elicitation-from", `${who} (${elicitation.tool}) asks you to open a web page:`));
  box.append(el("p", "elicitation-message", elicitation.message));
  const target = destination(elicitation.url);
  const site = el("p", "elicitation-site", "Site: ");
  site.append(el("strong", "elicitation-host", target ? target.hostname : "(none BooCode can open)"));
  box.append(site);
  const full = el("p", "elicitation-url");
  full.append(el("code", null, elicitation.url));
  box.append(full);
  if (/(^|\.)xn--/i.test(target ? target.hostname : "") || /[^\x20-\x7e]/.test(elicitation.url)) {
    box.append(el("p", "elicitation-warning", "This address uses international characters: check the site carefully."));
  }
  const canOpen = target !== null;
  box.append(
    el(
      "p",
      "note",
      canOpen
        ? "Nothing opens until you click Open. The page opens in a new tab; what you enter there goes to the server, not to BooCode."
        : "BooCode opens only http and https pages.",
    ),
  );
  const error = el("p", "elicitation-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  box.append(error);
  const buttons = el("div", "elicitation-buttons");
  const open = button("accept", "Open");
  open.disabled = !canOpen;
  buttons.append(open, button("decline", "Decline"), button("cancel", "Cancel"));
  box.append(buttons);
  const expires = expiresText(elicitation.expires_at, "Expires at", "if not answered");
  if (expires) box.append(el("p", "note elicitation-expires", expires));

  const answer = (action) => {
    error.hidden = true;
    if (send({ type: "elicitation_answer", id: elicitation.id, action })) box.classList.add("sending");
  };
  open.addEventListener("click", () => {
    if (openInNewTab(target)) answer("accept"); // opening is the consent
  });
  buttons.querySelector(".decline").addEventListener("click", () => answer("decline"));
  buttons.querySelector(".cancel").addEventListener("click", () => answer("cancel"));
  if (elicitation.state === "waiting") markElicitationWaiting(box, elicitation, send);
  return box;
}

// The person opened the page (in this tab or another): wait for the server, with manual controls.
export function markElicitationWaiting(box, frame, send) {
  if (!box.classList.contains("elicitation-link") || box.classList.contains("waiting")) return;
  box.classList.remove("sending");
  box.classList.add("waiting");
  const who = box.dataset.server || "the server";
  const status = el("p", "elicitation-status", `Waiting for ${who} to report that you finished on the page…`);
  status.setAttribute("role", "status");
  const buttons = el("div", "elicitation-buttons");
  const again = button("open-again", "Open again");
  const done = button("done", "I'm done");
  buttons.append(again, done);
  box.querySelector(".elicitation-buttons").replaceWith(status, buttons);
  const url = box.querySelector(".elicitation-url code").textContent;
  again.addEventListener("click", () => openInNewTab(destination(url)));
  done.addEventListener("click", () => {
    if (send({ type: "elicitation_answer", id: box.dataset.id, action: "done" })) box.classList.add("sending");
  });
  const expires = box.querySelector(".elicitation-expires");
  const text = expiresText(frame.expires_at, "Expires at", "if the server does not report");
  if (expires && text) expires.textContent = text;
}

// Build the form (or link) of one pending elicitation; `send(frame)` returns false when not connected.
export function renderElicitation(elicitation, send) {
  if (elicitation.mode === "url") return renderLink(elicitation, send);
  const formEl = el("form", "elicitation");
  formEl.dataset.id = elicitation.id;
  formEl.noValidate = true; // the server checks the answer and names every problem
  formEl.append(el("p", "elicitation-from", `${elicitation.tool} asks:`));
  formEl.append(el("p", "elicitation-message", elicitation.message));
  for (const field of elicitation.fields || []) formEl.append(renderField(field));
  const error = el("p", "elicitation-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  formEl.append(error);
  const buttons = el("div", "elicitation-buttons");
  const accept = el("button", "accept", "Accept");
  accept.type = "submit";
  const decline = el("button", "decline", "Decline");
  decline.type = "button";
  const cancel = el("button", "cancel", "Cancel");
  cancel.type = "button";
  buttons.append(accept, decline, cancel);
  formEl.append(buttons);
  const expires = expiresText(elicitation.expires_at, "Expires at", "if not answered");
  if (expires) formEl.append(el("p", "note", expires));

  const answer = (action, content) => {
    error.hidden = true;
    clearFieldErrors(formEl);
    const frame = { type: "elicitation_answer", id: elicitation.id, action };
    if (content !== undefined) frame.content = content;
    if (send(frame)) formEl.classList.add("sending");
  };
  formEl.addEventListener("submit", (event) => {
    event.preventDefault();
    answer("accept", readContent(formEl));
  });
  decline.addEventListener("click", () => answer("decline"));
  cancel.addEventListener("click", () => answer("cancel"));
  return formEl;
}

// Unmark the fields an earlier refusal marked.
function clearFieldErrors(formEl) {
  for (const row of formEl.querySelectorAll(".elicitation-field.field-invalid")) {
    row.classList.remove("field-invalid");
    row.querySelector(".field-error")?.remove();
    for (const control of row.querySelectorAll("input, select")) {
      control.removeAttribute("aria-invalid");
      const described = (control.getAttribute("aria-describedby") || "").split(" ")
        .filter((id) => id && !id.endsWith("-error")).join(" ");
      if (described) control.setAttribute("aria-describedby", described);
      else control.removeAttribute("aria-describedby");
    }
  }
}

// The server refused an answer (bad_answer): each field's problem at that field (marked, and the
// first of them focused), the whole reason at the bottom; the form stays open.
export function showElicitationError(formEl, message, fields) {
  const error = formEl.querySelector(".elicitation-error");
  formEl.classList.remove("sending");
  clearFieldErrors(formEl);
  let first = null;
  for (const row of formEl.querySelectorAll(".elicitation-field")) {
    const problem = fields && Object.hasOwn(fields, row.dataset.name) ? fields[row.dataset.name] : null;
    if (typeof problem !== "string") continue;
    row.classList.add("field-invalid");
    const note = el("p", "field-error", problem);
    note.id = `${formEl.dataset.id}-${row.dataset.name}-error`.replace(/[^\w-]/g, "_");
    row.append(note);
    for (const control of row.querySelectorAll("input, select")) {
      control.setAttribute("aria-invalid", "true");
      const described = control.getAttribute("aria-describedby");
      control.setAttribute("aria-describedby", described ? `${described} ${note.id}` : note.id);
    }
    first = first || row.querySelector("input, select");
  }
  showText(error, message);
  if (first) first.focus();
}

// The form (or link) is settled: replace it with one line saying how.
export function endElicitation(formEl, outcome) {
  let text = OUTCOMES[outcome] || `Form closed (${outcome}).`;
  if (formEl.classList.contains("elicitation-link")) {
    text = LINK_OUTCOMES[outcome] || `Closed (${outcome}).`;
    if (outcome === "expired" && formEl.classList.contains("waiting")) {
      text = "The server did not report completion in time.";
    }
  }
  const done = el("p", "elicitation-done", text);
  done.dataset.id = formEl.dataset.id;
  formEl.replaceWith(done);
  return done;
}
