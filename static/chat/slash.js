// The composer's "/" menu: typing "/" at the start of the message box lists the tool console's
// commands and the MCP servers' prompts (GET /api/prompts/), filtered as one types (by name,
// title and server; "/box rev" narrows to one server's matching prompts). Arrows move,
// Enter or Tab chooses, Escape closes. A command is put into the box (as if typed); a prompt with
// arguments opens a small form (required ones marked, suggestions from GET /api/complete/ as one
// types). The chosen prompt is got (POST /api/prompts/get/) and its text put into the box, where
// the person reads, edits and sends it. A prompt that cannot be one message (the assistant's turns
// in it, or too long) is shown in the form and goes in as it is, by a `prompt` frame
// {server, name, arguments}, once the person says "Send prompt" (docs/protocol.md).
// The menu also lists the skills of the MCP servers (GET /api/skills/, with their server and
// description): choosing one attaches it to the message, as a chip beside the attached
// resources (resources.js); the turn reads its SKILL.md, verified, for the model. A skill that
// cannot be loaded is listed with the reason and is not attached.
//
// The box stays a plain text box for assistive technology: it points at the list with
// aria-controls and at the highlighted option with aria-activedescendant, and the number of
// matches is announced. Names, titles and descriptions come from MCP servers: text only (never
// innerHTML), and a skill's text is never run: it only goes to the model, marked as the server's.

import { announce, el, getJSON, post } from "./dom.js";

const MAX_SHOWN = 50;
const COMPLETE_DELAY = 150; // ms of quiet typing before suggestions are asked for

let uid = 0;

// A list of options under (or over) a text field, driven from the field's keyboard.
class OptionList {
  constructor(field, { className, label, onChoose }) {
    this.field = field;
    this.onChoose = onChoose;
    this.items = [];
    this.active = -1;
    this.list = el("ul", `slash-list ${className || ""}`.trim());
    this.list.id = `slash-list-${++uid}`;
    this.list.setAttribute("role", "listbox");
    this.list.setAttribute("aria-label", label);
    this.list.hidden = true;
    field.setAttribute("aria-controls", this.list.id);
    field.setAttribute("aria-autocomplete", "list");
    // A press on an option must not take the focus from the field.
    this.list.addEventListener("pointerdown", (event) => event.preventDefault());
  }

  get isOpen() {
    return !this.list.hidden;
  }

  // `entries`: [{group?, label, detail?, note?, value}]
  show(entries) {
    this.items = entries;
    this.list.replaceChildren();
    let group = null;
    entries.forEach((entry, index) => {
      if (entry.group && entry.group !== group) {
        group = entry.group;
        const heading = el("li", "slash-group", group);
        heading.setAttribute("role", "presentation");
        this.list.append(heading);
      }
      const option = el("li", "slash-option");
      option.id = `${this.list.id}-${index}`;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", "false");
      const head = el("span", "slash-option-head");
      head.append(el("span", "slash-option-label", entry.label));
      if (entry.note) head.append(el("span", "slash-option-note", entry.note));
      option.append(head);
      if (entry.detail) option.append(el("span", "slash-option-detail", entry.detail));
      option.addEventListener("click", () => this.choose(index));
      this.list.append(option);
    });
    this.list.hidden = entries.length === 0;
    this.highlight(entries.length ? 0 : -1);
  }

  hide() {
    this.list.hidden = true;
    this.items = [];
    this.active = -1;
    this.field.removeAttribute("aria-activedescendant");
  }

  highlight(index) {
    const options = this.list.querySelectorAll("[role=option]");
    options.forEach((option, i) => option.setAttribute("aria-selected", String(i === index)));
    this.active = index;
    if (index >= 0 && options[index]) {
      this.field.setAttribute("aria-activedescendant", options[index].id);
      options[index].scrollIntoView({ block: "nearest" });
    } else {
      this.field.removeAttribute("aria-activedescendant");
    }
  }

  choose(index) {
    const entry = this.items[index];
    if (entry) this.onChoose(entry.value);
  }

  // Returns true when the key was the list's (the caller then stops it).
  keydown(event) {
    if (!this.isOpen || !this.items.length) return false;
    const count = this.items.length;
    if (event.key === "ArrowDown") this.highlight((this.active + 1) % count);
    else if (event.key === "ArrowUp") this.highlight((this.active - 1 + count) % count);
    else if ((event.key === "Enter" && !event.shiftKey && !event.isComposing) || event.key === "Tab") {
      if (this.active < 0) return false;
      this.choose(this.active);
    } else if (event.key === "Escape") this.hide();
    else return false;
    event.preventDefault();
    event.stopPropagation();
    return true;
  }
}

function matches(words, ...fields) {
  const haystack = fields.join(" ").toLowerCase();
  return words.every((word) => haystack.includes(word));
}

// The argument form of one prompt, shown over the composer.
class PromptForm {
  constructor(prompt, { onSubmit, onClose }) {
    this.prompt = prompt;
    this.onClose = onClose;
    this.timers = new Map();
    this.requests = new Map();
    this.form = el("form", "prompt-form");
    this.form.noValidate = true; // checked here, with messages that name the argument
    const titleId = `prompt-form-title-${++uid}`;
    this.form.setAttribute("aria-labelledby", titleId);
    const title = el("h2", "prompt-form-title");
    title.id = titleId;
    title.append(
      document.createTextNode(`Prompt ${prompt.title || prompt.name} `),
      el("span", "prompt-form-server", `from ${prompt.server}`),
    );
    this.form.append(title);
    if (prompt.description) this.form.append(el("p", "prompt-form-description", prompt.description));
    this.fields = new Map();
    for (const argument of prompt.arguments) this.form.append(this.field(argument));
    this.error = el("p", "prompt-form-error");
    this.error.setAttribute("role", "alert");
    this.error.hidden = true;
    const buttons = el("div", "prompt-form-buttons");
    const cancel = el("button", "secondary", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", () => this.close());
    const submit = el("button", "primary", "Insert prompt");
    submit.type = "submit";
    buttons.append(cancel, submit);
    this.submit = submit;
    this.preview = el("div", "prompt-form-preview");
    this.preview.hidden = true;
    this.form.append(this.preview, this.error, buttons);
    this.sending = false; // set by showWhole(): the next submit sends the prompt as it is
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const values = this.values();
      const missing = prompt.arguments.filter((a) => a.required && !values[a.name].trim()).map((a) => a.name);
      if (missing.length) {
        this.error.textContent = `Fill in ${missing.join(", ")}.`;
        this.error.hidden = false;
        this.fields.get(missing[0]).input.focus();
        return;
      }
      this.error.hidden = true;
      onSubmit(values, this.sending);
    });
    this.form.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !event.defaultPrevented) {
        event.preventDefault();
        event.stopPropagation();
        this.close();
      }
    });
  }

  field(argument) {
    const wrap = el("div", "prompt-field");
    const input = el("input");
    input.type = "text";
    input.id = `prompt-arg-${++uid}`;
    input.name = argument.name;
    input.autocomplete = "off";
    input.spellcheck = false;
    if (argument.required) {
      input.required = true;
      input.setAttribute("aria-required", "true");
    }
    const label = el("label", null, argument.name);
    label.htmlFor = input.id;
    if (argument.required) {
      const mark = el("span", "prompt-required", " *");
      mark.setAttribute("aria-hidden", "true");
      label.append(mark, el("span", "sr-only", " (required)"));
    } else {
      label.append(el("span", "prompt-optional", " (optional)"));
    }
    wrap.append(label, input);
    if (argument.description) {
      const help = el("p", "prompt-field-help", argument.description);
      help.id = `${input.id}-help`;
      input.setAttribute("aria-describedby", help.id);
      wrap.append(help);
    }
    const suggestions = new OptionList(input, {
      className: "prompt-suggestions",
      label: `Suggestions for ${argument.name}`,
      onChoose: (value) => {
        input.value = value;
        suggestions.hide();
      },
    });
    wrap.append(suggestions.list);
    input.addEventListener("keydown", (event) => suggestions.keydown(event));
    input.addEventListener("input", () => this.suggest(argument.name));
    input.addEventListener("blur", () => suggestions.hide());
    this.fields.set(argument.name, { input, suggestions });
    return wrap;
  }

  // What cannot go into the box: the start of each message with its role, and "Send prompt".
  showWhole(data) {
    const count = data.count;
    const why = data.messages.some((m) => m.role === "assistant")
      ? "has the assistant's turns in it" : "is longer than one message";
    this.preview.replaceChildren(el("p", "prompt-form-note", `This prompt ${why}, so it cannot go into ` +
      `the message box. "Send prompt" puts its ${count} message${count === 1 ? "" : "s"} into the ` +
      "conversation as they are, and the agent answers."));
    for (const message of data.messages) {
      const item = el("div", `prompt-preview-message role-${message.role === "assistant" ? "assistant" : "user"}`);
      item.append(el("span", "prompt-preview-role", message.role === "assistant" ? "Assistant" : "You"));
      const more = message.length > message.text.length ? ` … (${message.length} characters)` : "";
      item.append(el("p", null, message.text + more));
      this.preview.append(item);
    }
    if (count > data.messages.length) this.preview.append(el("p", "prompt-form-note", `… and ${count - data.messages.length} more`));
    this.preview.hidden = false;
    for (const { input } of this.fields.values()) input.readOnly = true;
    this.submit.textContent = "Send prompt";
    this.sending = true;
    this.submit.focus();
  }

  showError(text) {
    this.error.textContent = text;
    this.error.hidden = false;
  }

  values() {
    const values = {};
    for (const [name, { input }] of this.fields) values[name] = input.value;
    return values;
  }

  // Ask the server for suggestions once the person pauses; a newer request wins.
  suggest(name) {
    if (!this.prompt.completions) return;
    clearTimeout(this.timers.get(name));
    this.timers.set(name, setTimeout(() => this.complete(name), COMPLETE_DELAY));
  }

  async complete(name) {
    const { input, suggestions } = this.fields.get(name);
    const values = this.values();
    const context = {};
    for (const [key, value] of Object.entries(values)) if (key !== name && value) context[key] = value;
    const query = new URLSearchParams({
      server: this.prompt.server,
      ref: "prompt",
      name: this.prompt.name,
      argument: name,
      value: input.value,
    });
    if (Object.keys(context).length) query.set("context", JSON.stringify(context));
    if (this.requests.has(name)) this.requests.get(name).abort();
    const controller = new AbortController();
    this.requests.set(name, controller);
    let data;
    try {
      data = await getJSON(`/api/complete/?${query}`, controller.signal);
    } catch {
      return; // no suggestions: the field works without them
    }
    if (document.activeElement !== input) return;
    const values_ = Array.isArray(data.values) ? data.values.filter((v) => typeof v === "string") : [];
    const shown = values_.filter((value) => value !== input.value).slice(0, MAX_SHOWN);
    suggestions.show(shown.map((value) => ({ label: value, value })));
    if (shown.length) announce(`${shown.length} suggestion${shown.length === 1 ? "" : "s"}`);
  }

  close() {
    for (const timer of this.timers.values()) clearTimeout(timer);
    for (const controller of this.requests.values()) controller.abort();
    this.form.remove();
    this.onClose();
  }
}

export class SlashMenu {
  // `onPrompt(frame)` sends a prompt frame (resolves to true when it went out); `onSkill(skill)`
  // attaches a skill to the message being written (an error text, or "" when it was attached).
  constructor({ composer, onPrompt, onSkill }) {
    this.composer = composer;
    this.input = composer.input;
    this.onPrompt = onPrompt;
    this.onSkill = onSkill;
    this.data = null;
    this.loading = null;
    this.form = null;
    this.input.setAttribute("aria-haspopup", "listbox");
    this.options = new OptionList(this.input, {
      className: "slash-menu",
      label: "Commands, prompts and skills",
      onChoose: (value) => this.choose(value),
    });
    composer.form.classList.add("has-slash-menu");
    composer.form.prepend(this.options.list);
    // Capture on the form: the menu sees Enter before the composer would send the text.
    // A command typed out in full is sent by Enter, whether or not the menu has opened yet.
    composer.form.addEventListener("keydown", (event) => {
      if (event.target !== this.input) return;
      if (event.key === "Enter" && this.typedInFull()) this.options.hide();
      else this.options.keydown(event);
    }, true);
    this.input.addEventListener("input", () => this.update());
    this.input.addEventListener("blur", () => this.options.hide());
  }

  // Whether the box holds exactly a console command that needs nothing more ("/tools", "/help";
  // "/call " wants a tool, so its insert never equals trimmed text).
  typedInFull() {
    const text = this.input.value.trim();
    return (this.data?.commands || []).some((command) => command.insert === text);
  }

  // The "/word" being typed at the very start of the box, or null.
  query() {
    const match = /^\/(\S*)$/.exec(this.input.value);
    return match ? match[1] : null;
  }

  async update() {
    const query = this.query();
    if (query === null) {
      this.options.hide();
      return;
    }
    if (!this.data) {
      this.loading = this.loading || this.load();
      await this.loading;
      if (this.query() === null) return;
    }
    this.render(this.query());
  }

  async load() {
    // The skills are a list of their own: a server that lists none (or fails) leaves the prompts.
    const [prompts, skills] = await Promise.all([
      getJSON("/api/prompts/").catch(() => null),
      getJSON("/api/skills/").catch(() => null),
    ]);
    this.data = prompts ? { ...prompts, skills: Array.isArray(skills?.skills) ? skills.skills : [] } : null;
    this.loading = null;
    // Read again on the next "/": prompts and skills come and go with their servers.
    setTimeout(() => { this.data = null; }, 10000);
  }

  render(query) {
    const words = query.toLowerCase().split(/[\s/]+/).filter(Boolean);
    const data = this.data || { commands: [], prompts: [] };
    const entries = [];
    for (const command of data.commands || []) {
      if (!matches(words, command.name)) continue;
      entries.push({
        group: "Console commands",
        label: command.name,
        detail: command.description,
        value: { kind: "command", command },
      });
    }
    for (const prompt of data.prompts || []) {
      if (!matches(words, prompt.name, prompt.title || "", prompt.server)) continue;
      const args = prompt.arguments || [];
      entries.push({
        group: "Prompts",
        label: prompt.title ? `${prompt.title} (${prompt.name})` : prompt.name,
        note: `from ${prompt.server}`,
        detail: [prompt.description, args.length ? `Arguments: ${args.map((a) => a.name).join(", ")}` : ""]
          .filter(Boolean).join(" · "),
        value: { kind: "prompt", prompt },
      });
    }
    for (const skill of data.skills || []) {
      if (!matches(words, skill.label, skill.name, skill.server, "skill")) continue;
      entries.push({
        group: "Skills",
        label: skill.label,
        note: `from ${skill.server}`,
        detail: skill.problem ? `Cannot be loaded: ${skill.problem}` : skill.description,
        value: { kind: "skill", skill },
      });
    }
    const shown = entries.slice(0, MAX_SHOWN);
    this.options.show(shown);
    announce(shown.length ? `${shown.length} match${shown.length === 1 ? "" : "es"}` : "No matching command, prompt or skill");
  }

  choose(value) {
    this.options.hide();
    if (value.kind === "skill") {
      this.attachSkill(value.skill);
      return;
    }
    if (value.kind === "command") {
      this.input.value = value.command.insert;
      this.composer.autosize();
      this.input.focus();
      this.input.setSelectionRange(this.input.value.length, this.input.value.length);
      return;
    }
    const prompt = value.prompt;
    if (!(prompt.arguments || []).length) {
      this.insert(prompt, {});
      return;
    }
    this.openForm(prompt);
  }

  // Attach the skill (its chip goes beside the attached resources) and clear the "/…" typed to find
  // it; a skill that cannot be attached stays out, and onSkill has said why.
  attachSkill(skill) {
    const problem = this.onSkill(skill);
    if (!problem && this.query() !== null) this.input.value = "";
    this.composer.autosize();
    this.input.focus();
    if (!problem) announce(`Skill ${skill.label} from ${skill.server} attached to your message`);
  }

  openForm(prompt) {
    if (this.form) this.form.close();
    this.form = new PromptForm(prompt, {
      onSubmit: (values, whole) => (whole ? this.send(prompt, values) : this.insert(prompt, values)),
      onClose: () => {
        this.form = null;
        this.composer.focus();
      },
    });
    this.composer.form.before(this.form.form);
    const first = this.form.form.querySelector("input");
    if (first) first.focus();
  }

  // Get the prompt and put its text into the box (replacing the "/…" typed to find it); a prompt
  // that cannot be one message is shown in its form, to be sent as it is.
  async insert(prompt, values) {
    let answer;
    try {
      answer = await post("/api/prompts/get/", {
        server: prompt.server, name: prompt.name, arguments: JSON.stringify(values),
      });
    } catch {
      answer = { data: null, response: null };
    }
    const { data, response } = answer;
    if (!response?.ok || !data) {
      const reason = data?.error || "The prompt could not be got: the connection failed. Try again.";
      if (!this.form) this.openForm(prompt);
      this.form.showError(reason);
      return;
    }
    if (data.insert === null) {
      if (!this.form) this.openForm(prompt);
      this.form.showWhole(data);
      return;
    }
    const current = this.query() !== null ? "" : this.input.value;
    this.input.value = current.trim() ? `${current.replace(/\s+$/, "")}\n\n${data.insert}` : data.insert;
    this.composer.autosize();
    if (this.form) this.form.close();
    this.composer.focus();
    this.input.setSelectionRange(this.input.value.length, this.input.value.length);
    announce(`Prompt ${prompt.title || prompt.name} inserted: edit it if you like, then send`);
  }

  async send(prompt, values) {
    const frame = { type: "prompt", server: prompt.server, name: prompt.name, arguments: values };
    if (!(await this.onPrompt(frame))) return;
    if (this.query() !== null) this.input.value = "";
    this.composer.autosize();
    if (this.form) this.form.close();
    else this.composer.focus();
    announce(`Prompt ${prompt.title || prompt.name} sent`);
  }
}
