// The agent picker (each agent's description and the tools it may use, read live from
// /api/agents/), the short agent card at the top of a new conversation, and the model picker
// (/api/models/, saved per conversation with POST /c/<id>/model/).
//
// Agent and tool descriptions come from AGENTS.md and MCP servers: inserted as text only.

import { el, getJSON, icon, post } from "./dom.js";
import { Popover } from "./popup.js";

const CARD_TOOLS = 8;
// A stdio server run once for everybody (docs/security.md): what its "(shared)" mark means.
const SHARED_NOTE = "Shared: one process of this server serves everyone, so its files and memory are the same for every person.";
const OPTION_TOOLS = 6;

function toolChips(tools, limit) {
  const list = el("ul", "tool-chips");
  for (const tool of tools.slice(0, limit)) {
    const chip = el("li", "tool-chip");
    if (tool.server) chip.append(el("span", "chip-server", `${tool.server} · `));
    chip.append(document.createTextNode(tool.title || tool.tool || tool.name));
    chip.title = tool.description ? `${tool.name}: ${tool.description}` : tool.name;
    if (tool.shared) chip.title += `\n${SHARED_NOTE}`;
    list.append(chip);
  }
  if (tools.length > limit) list.append(el("li", "tool-chip more", `+${tools.length - limit} more`));
  return list;
}

function toolsSentence(agent) {
  const tools = agent.tools || [];
  if (!Array.isArray(agent.tools)) return "";
  if (!tools.length) return "No tools: it answers from the conversation only.";
  const counts = new Map();
  const sharedServers = new Set(tools.filter((tool) => tool.shared).map((tool) => tool.server));
  for (const tool of tools) counts.set(tool.server || "", (counts.get(tool.server || "") || 0) + 1);
  const parts = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([server, count]) => (server ? `${count} from ${server}${sharedServers.has(server) ? " (shared)" : ""}` : `${count} built in`));
  const count = `${tools.length} tool${tools.length === 1 ? "" : "s"}`;
  // With tool search on, the model reads only the tools its searches find (docs/tools.md).
  if (agent.searched) return `Searches ${count} for what each request needs: ${parts.join(", ")}.`;
  return `May use ${count}: ${parts.join(", ")}.`;
}

// The card shown at the top of an empty conversation. `modelName`: the model the conversation
// would use (chat.js, effectiveModel(): the picker's, else the agent's, else the default).
export function agentCard(agent, modelName) {
  const card = el("section", "agent-card");
  card.setAttribute("aria-label", `Agent: ${agent.name}`);
  const head = el("div", "agent-card-head");
  head.append(icon("agent"), el("span", "agent-card-name", agent.name));
  if (modelName) head.append(el("span", "agent-card-model", modelName));
  card.append(head);
  if (agent.description) card.append(el("p", "agent-card-description", agent.description));
  const sentence = toolsSentence(agent);
  if (sentence) card.append(el("p", "note", sentence));
  if ((agent.tools || []).length) card.append(toolChips(agent.tools, CARD_TOOLS));
  return card;
}

export class AgentPicker {
  // `getConversation()` is the open conversation's id or null (the landing).
  constructor({ root, select, panel, options, initial, getConversation, onChange, onSaved, onError }) {
    this.root = root;
    this.select = select;
    this.panel = panel;
    this.optionsEl = options;
    this.getConversation = getConversation;
    this.onChange = onChange;
    this.onSaved = onSaved || (() => {});
    this.onError = onError;
    this.agents = Array.isArray(initial) && initial.length ? initial : this.fromSelect();
    this.popover = new Popover(panel);
    this.button = el("button", "picker-button");
    this.button.type = "button";
    this.button.id = "agent-button";
    this.button.setAttribute("aria-haspopup", "dialog");
    this.button.setAttribute("aria-expanded", "false");
    this.button.setAttribute("aria-controls", panel.id);
    root.append(this.button);
    root.classList.add("enhanced");
    this.button.addEventListener("click", () => {
      if (this.popover.isOpen) this.popover.close();
      else this.open();
    });
    this.renderButton();
  }

  fromSelect() {
    return [...this.select.options].map((option) => ({ name: option.value, description: "", model: "" }));
  }

  get current() {
    const name = this.select.value;
    return this.agents.find((agent) => agent.name === name) || this.agents[0] || null;
  }

  renderButton() {
    const agent = this.current;
    this.button.replaceChildren(
      icon("agent"),
      el("span", "picker-value", agent ? agent.name : "No agent"),
      icon("chevron"),
    );
    this.button.setAttribute("aria-label", `Agent: ${agent ? agent.name : "none"}. Choose another`);
    this.button.title = agent && agent.description ? agent.description : "Choose the agent";
  }

  // Re-read the agents (AGENTS.md and the servers' tools may have changed); keeps the old list on error.
  async refresh() {
    try {
      const data = await getJSON("/api/agents/");
      if (Array.isArray(data.agents) && data.agents.length) {
        this.agents = data.agents;
        const names = this.agents.map((agent) => agent.name);
        const chosen = this.select.value;
        this.select.replaceChildren(...names.map((name) => {
          const option = el("option", null, name);
          option.value = name;
          return option;
        }));
        if (names.includes(chosen)) this.select.value = chosen;
        this.renderButton();
      }
    } catch {
      // The picker works from the names the page was rendered with.
    }
    return this.agents;
  }

  renderOptions() {
    const current = this.current;
    this.optionsEl.replaceChildren();
    for (const agent of this.agents) {
      const label = el("label", "agent-option");
      const radio = el("input");
      radio.type = "radio";
      radio.name = "agent-choice";
      radio.value = agent.name;
      radio.checked = current !== null && agent.name === current.name;
      label.append(radio, el("span", "agent-name", agent.name));
      if (agent.description) label.append(el("span", "agent-desc", agent.description));
      const sentence = toolsSentence(agent);
      if (sentence) label.append(el("span", "agent-tools", sentence));
      if ((agent.tools || []).length) label.append(toolChips(agent.tools, OPTION_TOOLS));
      radio.addEventListener("change", () => this.choose(agent.name));
      // Enter or a click on the already chosen one just closes the panel.
      radio.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          this.popover.close();
        }
      });
      label.addEventListener("click", (event) => {
        if (event.detail > 0 && radio.checked && event.target === radio) this.popover.close();
      });
      this.optionsEl.append(label);
    }
  }

  async open() {
    this.renderOptions();
    this.popover.open(this.button);
    const shown = JSON.stringify(this.agents);
    await this.refresh();
    // Drawn again only when the list changed: an option must not be replaced under the pointer
    // of a person who is clicking it.
    if (this.popover.isOpen && JSON.stringify(this.agents) !== shown) {
      const focusedValue = document.activeElement && document.activeElement.value;
      this.renderOptions();
      const again = this.optionsEl.querySelector(`input[value="${CSS.escape(focusedValue || this.select.value)}"]`);
      if (again) again.focus();
    }
  }

  async choose(name) {
    const previous = this.select.value;
    this.select.value = name;
    this.renderButton();
    this.onChange(this.current);
    const conversation = this.getConversation();
    if (conversation === null) return;
    try {
      await post(`/c/${conversation}/agent/`, { agent: name });
      this.onSaved(this.current);
    } catch (error) {
      this.select.value = previous;
      this.renderButton();
      this.onChange(this.current);
      this.onError(`Could not change the agent (${error.message}).`);
    }
  }
}

export class ModelPicker {
  constructor({ select, getConversation, onError, onChange }) {
    this.select = select;
    this.getConversation = getConversation;
    this.onError = onError;
    this.onChange = onChange || (() => {});
    this.defaultModel = select.dataset.default || "";
    this.loaded = false;
    select.addEventListener("change", () => this.save());
  }

  get value() {
    return this.select.value;
  }

  // The endpoint's models (cached by the server); the chosen one stays even if not listed.
  async load() {
    let data;
    const conversation = this.getConversation();
    try {
      data = await getJSON(`/api/models/${conversation === null ? "" : `?conversation=${conversation}`}`);
    } catch {
      return; // older server or endpoint down: the default option stays
    }
    this.loaded = true;
    const chosen = this.select.value;
    if (data.default) this.defaultModel = data.default;
    const options = [this.option("", `Default (${this.defaultModel || "server setting"})`)];
    const models = Array.isArray(data.models) ? data.models : [];
    for (const name of models) options.push(this.option(name, name));
    if (chosen && !models.includes(chosen)) options.push(this.option(chosen, chosen));
    if (data.error) {
      const note = this.option("__error__", `Models not listed: ${data.error}`);
      note.disabled = true;
      options.push(note);
      this.select.title = `The model list is not available: ${data.error}`;
    } else {
      this.select.title = "";
    }
    this.select.replaceChildren(...options);
    this.select.value = chosen;
  }

  option(value, text) {
    const option = el("option", null, text);
    option.value = value;
    return option;
  }

  set(value) {
    if (value && ![...this.select.options].some((option) => option.value === value)) {
      this.select.append(this.option(value, value));
    }
    this.select.value = value || "";
  }

  async save() {
    this.onChange(this.select.value);
    const conversation = this.getConversation();
    if (conversation === null) return; // the landing: saved once the conversation exists
    await this.saveFor(conversation);
  }

  async saveFor(conversation) {
    try {
      const { data } = await post(`/c/${conversation}/model/`, { model: this.select.value });
      if (data && typeof data.model === "string") this.set(data.model);
      return true;
    } catch (error) {
      this.onError(`Could not change the model (${error.message}).`);
      return false;
    }
  }
}
