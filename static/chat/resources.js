// MCP resources in the chat: the composer's attach button and picker (search, templates filled in
// with completion/complete suggestions), the chips of what is attached, the attachments shown on
// a sent message, the resource links of tool cards, and the viewer (a dialog) that reads a
// resource through the hub (GET /api/resources/read/, docs/protocol.md).
//
// A message being edited shows its attachments as the same removable chips, with a button that
// opens this picker for it (Attacher.editor, used by messages.js through chat.js).
//
// Skills (chosen in the "/" menu, slash.js) are attached the same way, as chips marked "skill"
// ({server, uri, kind: "skill"}, the URI of the skill's SKILL.md); the viewer reads a skill's
// SKILL.md, verified, through GET /api/skills/read/.
//
// Safety: everything a server sends is untrusted. Names, URIs, text and JSON go in as text; the
// only HTML inserted is Markdown the server rendered and sanitised (boocode/chat/wire/rendering.py);
// images only as data: URLs of raster types (never SVG as markup); links open in a new tab with
// rel="noopener noreferrer".

import { el, icon, iconButton, showText } from "./dom.js";

const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const SEARCH_DELAY = 200;
const MAX_SUGGESTIONS = 10;
const MAX_ATTACHMENTS = 10;

function currentConversation() {
  const value = document.getElementById("chat")?.dataset.conversation;
  return value ? Number(value) : null;
}

async function getJson(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const response = await fetch(`${path}?${query}`, { credentials: "same-origin", headers: { accept: "application/json" } });
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) throw new Error((data && data.error) || `HTTP ${response.status}`);
  return data;
}

function label(item) {
  return item.title || item.name || item.uri;
}

// --- RFC 6570 templates (the expressions servers use: {a}, {+a}, {#a}, {/a}, {.a}, {?a,b}, {&a}) ------
function expandTemplate(template, values) {
  return template.replace(/\{([+#./;?&]?)([^}]*)\}/g, (_, operator, body) => {
    const names = body.split(",").map((part) => part.split(":")[0].replace(/\*$/, "").trim()).filter(Boolean);
    const present = names.filter((name) => values[name] !== undefined && values[name] !== "");
    const encode = (value) => (operator === "+" || operator === "#" ? encodeURI(value) : encodeURIComponent(value));
    if (operator === "?" || operator === "&") {
      if (!present.length) return "";
      return operator + present.map((name) => `${name}=${encodeURIComponent(values[name])}`).join("&");
    }
    if (!present.length) return "";
    const joined = present.map((name) => encode(values[name]));
    const separator = { "": ",", "+": ",", "#": ",", "/": "/", ".": ".", ";": ";" }[operator] || ",";
    return (operator === "+" || operator === "" ? "" : operator) + joined.join(separator);
  });
}

// --- the viewer ------------------------------------------------------------------------------------
let viewer = null;

function viewerDialog() {
  if (viewer) return viewer;
  const dialog = el("dialog", "dialog resource-viewer");
  dialog.id = "resource-viewer";
  dialog.setAttribute("aria-labelledby", "resource-viewer-title");
  const title = el("h2", null, "Resource");
  title.id = "resource-viewer-title";
  const where = el("p", "resource-where");
  const body = el("div", "resource-body");
  const error = el("p", "dialog-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  const buttons = el("div", "dialog-buttons");
  const close = el("button", "secondary", "Close");
  close.type = "button";
  close.addEventListener("click", () => dialog.close());
  buttons.append(close);
  dialog.append(title, where, body, error, buttons);
  document.body.append(dialog);
  viewer = { dialog, title, where, body, error, close, token: 0 };
  return viewer;
}

function jsonType(mime, uri) {
  return mime === "application/json" || mime.endsWith("+json") || /\.json$/i.test(uri);
}

function renderItem(item) {
  const box = el("div", "resource-item");
  const mime = (item.mimeType || "").split(";")[0].trim().toLowerCase();
  if (typeof item.blob === "string") {
    if (IMAGE_TYPES.has(mime) && BASE64.test(item.blob)) {
      const img = el("img", "resource-image");
      img.alt = `Image ${item.uri}`;
      img.src = `data:${mime};base64,${item.blob}`;
      box.append(img);
    } else {
      box.append(el("p", "note", `Binary content (${mime || "unknown type"}, ${item.size ?? "?"} bytes) cannot be shown here.`));
    }
  } else if (typeof item.html === "string") {
    const rendered = el("div", "resource-markdown");
    rendered.innerHTML = item.html; // rendered from Markdown and sanitised by the server
    for (const link of rendered.querySelectorAll("a[href]")) {
      link.target = "_blank";
      link.rel = "noopener noreferrer nofollow";
    }
    box.append(rendered);
  } else if (typeof item.text === "string") {
    let shown = item.text;
    if (jsonType(mime, item.uri || "")) {
      try {
        shown = JSON.stringify(JSON.parse(item.text), null, 2);
      } catch {
        shown = item.text;
      }
    }
    const pre = el("pre", "resource-text", shown);
    pre.tabIndex = 0;
    box.append(pre);
  }
  if (item.note) box.append(el("p", "note", item.note));
  return box;
}

// Read a resource (or a skill's SKILL.md) through the hub and show it; `server` is whose it is.
async function openResource({ server, uri, name, kind }) {
  const view = viewerDialog();
  const token = ++view.token;
  view.title.textContent = kind === "skill" ? `Skill ${name || uri}` : name || uri;
  view.where.textContent = `${server} · ${uri}`;
  view.body.replaceChildren(el("p", "note", "Loading…"));
  view.error.hidden = true;
  if (!view.dialog.open) view.dialog.showModal();
  view.close.focus();
  try {
    const data = kind === "skill"
      ? await getJson("/api/skills/read/", { server, skill: uri })
      : await getJson("/api/resources/read/", { server, uri, conversation: currentConversation() });
    if (token !== view.token) return;
    view.body.replaceChildren(...(data.contents || []).map(renderItem));
    if (!(data.contents || []).length) view.body.replaceChildren(el("p", "note", "The resource is empty."));
  } catch (error) {
    if (token !== view.token) return;
    view.body.replaceChildren();
    view.error.textContent = error.message;
    view.error.hidden = false;
  }
}

function resourceButton(className, server, item) {
  const button = el("button", className);
  button.type = "button";
  if (item.kind === "skill") button.append(el("span", "chip-kind", "skill"));
  button.append(el("span", "resource-name", label(item)));
  if (item.uri && label(item) !== item.uri) button.append(el("span", "resource-uri", item.uri));
  button.title = `Open ${item.uri} (${server})`;
  button.addEventListener("click", () => openResource({ server, uri: item.uri, name: label(item), kind: item.kind }));
  return button;
}

// The resources a tool result linked or embedded, as buttons that open the viewer (toolcards.js).
export function resourceLinks(call) {
  const linked = Array.isArray(call.resources) ? call.resources : [];
  if (!linked.length || !call.server) return [];
  const box = el("div", "tool-resources");
  box.append(el("span", "tool-resources-label", "Resources:"));
  for (const item of linked) box.append(resourceButton("resource-link", call.server, item));
  return [box];
}

// A sent message's attachments as chips that open the viewer (messages.js, after the body).
export function showAttachments(article, body, message) {
  article.querySelector(":scope > .message-attachments")?.remove();
  const attached = Array.isArray(message.attachments) ? message.attachments : [];
  if (!attached.length) return;
  const list = el("ul", "message-attachments");
  list.setAttribute("aria-label", "Attached resources and skills");
  for (const item of attached) {
    const li = el("li");
    const chip = resourceButton("attachment-chip", item.server, item);
    if (item.note) chip.title = `${item.uri}: ${item.note}`;
    li.append(chip);
    list.append(li);
  }
  body.after(list);
}

// Removable chips of resources and skills to send ({server, uri, name, kind?}); `onRemove(item)`
// when one is removed.
function renderChips(list, items, onRemove) {
  list.replaceChildren();
  for (const item of items) {
    const li = el("li", "attachment-chip pending");
    if (item.kind === "skill") li.append(el("span", "chip-kind", "skill"));
    li.append(el("span", "resource-name", item.name));
    li.title = `${item.server} · ${item.uri}`;
    const remove = el("button", "chip-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${item.kind === "skill" ? "skill " : ""}${item.name}`);
    remove.addEventListener("click", () => onRemove(item));
    li.append(remove);
    list.append(li);
  }
  list.hidden = !items.length;
}

// Adds `item` to `items` unless it is there already; an error text when the list is full.
function addChip(items, item) {
  const kind = item.kind === "skill" ? "skill" : undefined;
  if (items.some((other) => other.server === item.server && other.uri === item.uri && other.kind === kind)) return "";
  if (items.length >= MAX_ATTACHMENTS) return `At most ${MAX_ATTACHMENTS} resources and skills can be attached to one message.`;
  items.push({ server: item.server, uri: item.uri, name: label(item), ...(kind ? { kind } : {}) });
  return "";
}

// What a frame carries of the chips: {server, uri}, and kind "skill" for a skill.
function frameItems(items) {
  return items.map(({ server, uri, kind }) => ({ server, uri, ...(kind ? { kind } : {}) }));
}

// The attachments of a message being edited (messages.js): its chips, removable, and a button
// that opens the composer's picker to add more. take() is what the edit frame carries.
class EditAttachments {
  constructor(attacher, attachments) {
    this.attacher = attacher;
    this.items = [];
    for (const item of Array.isArray(attachments) ? attachments : []) {
      if (item && item.server && item.uri) addChip(this.items, item);
    }
    this.element = el("div", "edit-attachments");
    this.chips = el("ul", "attachment-chips");
    this.chips.setAttribute("aria-label", "Attached resources");
    this.button = el("button", "secondary edit-attach-button");
    this.button.type = "button";
    this.button.setAttribute("aria-haspopup", "dialog");
    this.button.append(icon("clip"), el("span", null, "Attach"));
    this.button.addEventListener("click", () => attacher.open(this));
    this.element.append(this.chips, this.button);
    this.render();
  }

  add(item) {
    const problem = addChip(this.items, item);
    this.render();
    return problem;
  }

  render() {
    renderChips(this.chips, this.items, (item) => {
      this.items = this.items.filter((other) => other !== item);
      this.render();
      this.button.focus();
    });
  }

  take() {
    return frameItems(this.items);
  }
}

// --- the composer's picker ----------------------------------------------------------------------------
export class Attacher {
  constructor({ form }) {
    this.form = form;
    this.items = [];
    this.lastSent = [];
    this.searchTimer = null;
    this.searchToken = 0;
    this.target = null; // an EditAttachments the picker adds to (else the composer's chips)

    this.button = iconButton("clip", "Attach a resource", "attach-button");
    this.button.setAttribute("aria-haspopup", "dialog");
    const buttons = form.querySelector(".composer-buttons");
    buttons.prepend(this.button);
    this.chips = el("ul", "attachment-chips");
    this.chips.setAttribute("aria-label", "Resources to attach");
    this.chips.hidden = true;
    form.querySelector(".composer-box").before(this.chips);
    this.button.addEventListener("click", () => this.open());
    this.buildDialog();
  }

  buildDialog() {
    const dialog = el("dialog", "dialog resource-picker");
    dialog.id = "resource-picker";
    dialog.setAttribute("aria-labelledby", "resource-picker-title");
    const title = el("h2", null, "Attach a resource");
    title.id = "resource-picker-title";
    const searchLabel = el("label", null, "Search");
    const search = el("input");
    search.type = "search";
    search.id = "resource-search";
    search.autocomplete = "off";
    search.placeholder = "Name, URI or description";
    searchLabel.htmlFor = search.id;
    const results = el("div", "resource-results");
    results.setAttribute("aria-live", "polite");
    const template = el("form", "template-form");
    template.hidden = true;
    const error = el("p", "dialog-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    const buttons = el("div", "dialog-buttons");
    const close = el("button", "secondary", "Close");
    close.type = "button";
    close.addEventListener("click", () => dialog.close());
    buttons.append(close);
    dialog.append(title, searchLabel, search, results, template, error, buttons);
    document.body.append(dialog);
    search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.runSearch(), SEARCH_DELAY);
    });
    dialog.addEventListener("close", () => {
      const opener = this.target?.button?.isConnected ? this.target.button : this.button;
      this.target = null;
      opener.focus();
    });
    Object.assign(this, { dialog, search, results, template, error });
  }

  // A skill chosen in the "/" menu (slash.js): a chip like a resource's, marked "skill". Returns an
  // error text, or "" when it was attached.
  attachSkill(skill) {
    const problem = addChip(this.items, { server: skill.server, uri: skill.uri, name: skill.label, kind: "skill" });
    if (!problem) this.render();
    return problem;
  }

  // The chips and picker of a message being edited (messages.js): see EditAttachments.
  editor(attachments) {
    return new EditAttachments(this, attachments);
  }

  // `target`: an EditAttachments that receives what is picked (null: the composer).
  open(target = null) {
    this.target = target;
    this.template.hidden = true;
    this.results.hidden = false;
    this.search.value = "";
    this.results.replaceChildren(); // the last opening's results are not this one's
    this.showError("");
    this.dialog.showModal();
    this.search.focus();
    this.runSearch();
  }

  showError(text) {
    showText(this.error, text);
  }

  async runSearch() {
    const token = ++this.searchToken;
    // Results already shown stay (and can be picked) until the new ones arrive: a click is not
    // lost to a list replaced under the pointer.
    this.results.setAttribute("aria-busy", "true");
    if (!this.results.querySelector(".resource-options")) this.results.replaceChildren(el("p", "note", "Loading…"));
    let data;
    try {
      data = await getJson("/api/resources/", { q: this.search.value.trim(), conversation: currentConversation() });
    } catch (error) {
      if (token === this.searchToken) {
        this.results.setAttribute("aria-busy", "false");
        this.results.replaceChildren();
        this.showError(`Could not list resources (${error.message}).`);
      }
      return;
    }
    if (token !== this.searchToken) return;
    this.results.setAttribute("aria-busy", "false");
    this.showError("");
    this.completions = new Map((data.servers || []).map((server) => [server.name, server.completions]));
    const list = el("ul", "resource-options");
    for (const item of data.resources || []) list.append(this.option(item, () => this.add(item)));
    for (const item of data.templates || []) list.append(this.option(item, () => this.fill(item)));
    const failed = (data.servers || []).filter((server) => server.error);
    const parts = [];
    if (list.childElementCount) parts.push(list);
    else parts.push(el("p", "note", this.search.value.trim() ? "Nothing matches." : "No server offers resources here."));
    for (const server of failed) parts.push(el("p", "note", `${server.name}: ${server.error}`));
    this.results.replaceChildren(...parts);
  }

  option(item, choose) {
    const li = el("li");
    const button = el("button", `resource-option kind-${item.kind}`);
    button.type = "button";
    const head = el("span", "resource-option-head");
    head.append(el("span", "resource-name", label(item)), el("span", "resource-server", item.server));
    if (item.kind === "template") head.append(el("span", "badge", "template"));
    button.append(head, el("span", "resource-uri", item.uri || item.uriTemplate));
    if (item.description) button.append(el("span", "resource-description", item.description));
    button.addEventListener("click", choose);
    li.append(button);
    return li;
  }

  // A template: one input per variable, each offering the server's completions as one types.
  fill(item) {
    const form = this.template;
    form.replaceChildren();
    form.append(el("h3", null, label(item)), el("p", "resource-uri", item.uriTemplate));
    const values = {};
    const inputs = [];
    const preview = el("p", "template-preview");
    const update = () => {
      for (const input of inputs) values[input.name] = input.value;
      preview.textContent = expandTemplate(item.uriTemplate, values);
    };
    for (const [index, name] of (item.arguments || []).entries()) {
      const id = `template-arg-${index}`;
      const field = el("div", "template-field");
      const fieldLabel = el("label", null, name);
      fieldLabel.htmlFor = id;
      const input = el("input");
      input.id = id;
      input.name = name;
      input.autocomplete = "off";
      input.required = true;
      const suggestions = el("ul", "suggestions");
      suggestions.id = `${id}-suggestions`;
      suggestions.setAttribute("aria-label", `Suggestions for ${name}`);
      input.setAttribute("aria-controls", suggestions.id);
      let token = 0;
      const suggest = async () => {
        update();
        if (!this.completions?.get(item.server)) return;
        const mine = ++token;
        const context = {};
        for (const other of inputs) if (other !== input && other.value) context[other.name] = other.value;
        try {
          const data = await getJson("/api/complete/", {
            server: item.server, ref: "resource", name: item.uriTemplate, argument: name, value: input.value,
            context: Object.keys(context).length ? JSON.stringify(context) : "", conversation: currentConversation(),
          });
          if (mine !== token) return;
          suggestions.replaceChildren(...(data.values || []).slice(0, MAX_SUGGESTIONS).map((value) => {
            const li = el("li");
            const choice = el("button", "suggestion", value);
            choice.type = "button";
            choice.addEventListener("click", () => {
              input.value = value;
              suggestions.replaceChildren();
              update();
              input.focus();
            });
            li.append(choice);
            return li;
          }));
        } catch (error) {
          if (mine === token) suggestions.replaceChildren(el("li", "note", error.message));
        }
      };
      input.addEventListener("input", suggest);
      input.addEventListener("focus", suggest, { once: true });
      field.append(fieldLabel, input, suggestions);
      form.append(field);
      inputs.push(input);
    }
    const buttons = el("div", "dialog-buttons");
    const back = el("button", "secondary", "Back");
    back.type = "button";
    back.addEventListener("click", () => {
      form.hidden = true;
      this.results.hidden = false;
      this.search.focus();
    });
    const attach = el("button", "primary", "Attach");
    attach.type = "submit";
    buttons.append(back, attach);
    form.append(preview, buttons);
    form.onsubmit = (event) => {
      event.preventDefault();
      update();
      if (inputs.some((input) => !input.value.trim())) {
        this.showError("Fill in every value first.");
        return;
      }
      // The chip says which template and what went in ("Dynamic Resource: 7", not a bare "7").
      const uri = expandTemplate(item.uriTemplate, values);
      const name = `${label(item)}: ${inputs.map((input) => input.value.trim()).join(", ")}`;
      this.add({ server: item.server, uri, name });
    };
    this.results.hidden = true;
    form.hidden = false;
    update();
    inputs[0]?.focus();
  }

  add(item) {
    const problem = this.target ? this.target.add(item) : addChip(this.items, item);
    if (problem) {
      this.showError(problem);
      return;
    }
    this.render();
    this.dialog.close();
  }

  render() {
    renderChips(this.chips, this.items, (item) => {
      this.items = this.items.filter((other) => other !== item);
      this.render();
      this.button.focus();
    });
  }

  // What the user_message frame carries; the chips go (they come back if the server refuses it).
  take() {
    const taken = frameItems(this.items);
    this.lastSent = this.items;
    this.items = [];
    this.render();
    return taken;
  }

  restore() {
    if (!this.lastSent.length) return;
    this.items = [...this.lastSent, ...this.items];
    this.lastSent = [];
    this.render();
  }
}
