// The status line: the socket, the model the conversation uses (its state as the last status
// frame says, so "(unreachable)" goes as soon as the server sees the model again), the MCP
// servers, the conversation's token usage and, when a daily budget applies to the person, how
// much of it they have used today ("12,300 of 50,000 tokens today").
//
// On a phone (status.css) the line is one row: the connection and a summary button ("model ·
// tokens · servers") that expands to the full details on a tap; on wider screens every part shows,
// the servers as one summary ("3 servers ready", "2/3 servers ready") whose button lists them.
//
// While the socket is down (`stale` on the line) what the line last heard may no longer be true
// (a restarting server stops its MCP servers first): the model's and the servers' dots take the
// line's own colour until the next status frame; only the connection's is coloured.
//
// Staff (data-staff on the line) see each server's state as the hub has it: the retry plan and the
// last error as a tooltip. Everyone else sees what concerns them: a server is ready, connecting,
// unavailable (its tools left out until it is back) or waiting for a sign-in; servers switched off
// by staff are not listed.

import { el, formatCount, icon } from "./dom.js";

// Statuses that read better in words (OAuth: see docs/configuration.md, "Signing in").
const STATUS_WORDS = {
  auth_required: "needs a sign-in",
  per_user: "per person (Your accounts)",
  idle: "yours, opens with your next message",
};
const SERVING = new Set(["ready", "per_user", "idle"]);
// What a person who is not staff reads for a server that cannot serve now.
const PERSON_WORDS = { failed: "unavailable", unavailable: "unavailable", connecting: "connecting" };

// The hub's retry plan as the frame carried it (docs/protocol.md, `status`): seconds from then.
function retryText(server) {
  if (server.retry_in === undefined) return "";
  if (server.circuit_open) return ` (${server.attempts} reconnects failed, next try in ${server.retry_in} s)`;
  return ` (reconnecting in ${server.retry_in} s)`;
}

// "1 tool", "3 tools".
function toolCount(count) {
  return `${count} tool${count === 1 ? "" : "s"}`;
}

export class StatusLine {
  constructor() {
    this.root = document.getElementById("statusline");
    this.connEl = document.getElementById("connection-state");
    this.modelEl = document.getElementById("model-state");
    this.serversEl = document.getElementById("server-states");
    this.usageEl = document.getElementById("conversation-usage");
    this.budgetEl = document.getElementById("budget-use");
    this.staff = this.root.dataset.staff === "true";
    this.serversToggle = el("button", "servers-toggle");
    this.serversToggle.type = "button";
    this.serversToggle.hidden = true; // until a status frame says what the servers are
    this.serversToggle.id = "servers-toggle";
    this.serversToggle.setAttribute("aria-expanded", "false");
    this.serversToggleText = el("span", "servers-toggle-text", "");
    this.serversToggle.append(this.serversToggleText, icon("chevron"));
    this.serverList = el("ul", "server-list");
    this.serverList.id = "server-list";
    this.serverList.setAttribute("aria-label", "MCP servers");
    this.serversToggle.setAttribute("aria-controls", this.serverList.id);
    this.serversToggle.addEventListener("click", () => this.expandServers(!this.serversEl.classList.contains("open")));
    this.serversEl.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.serversEl.classList.contains("open")) {
        event.stopPropagation();
        this.expandServers(false);
        this.serversToggle.focus();
      }
    });
    document.addEventListener("click", (event) => {
      if (!this.serversEl.contains(event.target)) this.expandServers(false);
    });
    this.serversEl.replaceChildren(this.serversToggle, this.serverList);
    // Before the first status frame: what the page was rendered with.
    this.model = {
      configured: !/^no model/.test(this.modelEl.textContent),
      name: this.root.dataset.serverModel || "",
      last_error: null,
    };
    this.effective = ""; // the conversation's model ("" = the server's default)
    this.serverCount = null; // null: no status frame yet
    this.usageShort = ""; // the phone's form of the usage ("1.5k tokens")
    this.budgetShort = ""; // the phone's form of a budget nearly spent ("48k of 50k today")
    this.summary = this.buildSummary();
  }

  // The phone's one-line summary, a button that shows and hides the details.
  buildSummary() {
    const button = el("button", "status-summary");
    button.type = "button";
    button.id = "status-summary";
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-controls", "statusline");
    this.summaryText = el("span", "status-summary-text");
    button.append(el("span", "sr-only", "Status: "), this.summaryText, icon("chevron"));
    button.addEventListener("click", () => this.expand(!this.root.classList.contains("expanded")));
    this.root.insertBefore(button, this.modelEl);
    return button;
  }

  expand(open) {
    this.root.classList.toggle("expanded", open);
    this.summary.setAttribute("aria-expanded", String(open));
    this.summary.title = open ? "Hide the status details" : "Show the status details";
  }

  expandServers(open) {
    this.serversEl.classList.toggle("open", open);
    this.serversToggle.setAttribute("aria-expanded", String(open));
  }

  connection(text, good) {
    this.connEl.textContent = text;
    this.connEl.className = `conn ${text ? (good ? "good" : "bad") : ""}`;
    this.root.classList.toggle("stale", Boolean(text) && !good);
    this.serversToggle.title = text && !good ? "As last heard before the connection was lost" : "";
  }

  // The model the conversation uses (its pick, else its agent's `model:`); "" = the server's default.
  setModel(name) {
    this.effective = name || "";
    this.paintModel();
    this.paintSummary();
  }

  paintModel() {
    const model = this.model;
    const modelEl = this.modelEl;
    const name = this.effective || model.name;
    if (!model.configured) {
      modelEl.textContent = "no model configured";
      modelEl.className = "model bad";
      modelEl.title = "Set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL";
    } else if (!name) {
      return; // no status frame and no conversation model yet: the rendered text stays
    } else if (model.last_error) {
      modelEl.textContent = `model: ${name} (unreachable)`;
      modelEl.className = "model bad";
      modelEl.title = model.last_error;
    } else {
      modelEl.textContent = `model: ${name}`;
      modelEl.className = "model";
      modelEl.title = "";
    }
  }

  render(frame) {
    this.model = frame.model || {};
    this.paintModel();
    const all = frame.servers || [];
    const counted = all.filter((server) => server.status !== "disabled"); // switched off by staff
    const listed = this.staff ? all : counted;
    this.serverList.replaceChildren();
    if (!listed.length) this.serverList.append(el("li", "server none", all.length ? "MCP servers off" : "no MCP servers"));
    for (const server of listed) {
      // The class is the hub's state (its dot's colour); the words are the reader's.
      const item = el("li", `server server-${server.status}`);
      item.dataset.name = server.name;
      let words = STATUS_WORDS[server.status] || (this.staff ? server.status : PERSON_WORDS[server.status]) || server.status;
      // Tools held for an administrator's review are counted too: "ready (3 tools, 1 held for review)".
      if (server.status === "ready") words += ` (${toolCount(server.tool_count)}${server.held_count ? `, ${server.held_count} held for review` : ""})`;
      else if (this.staff) words += retryText(server);
      item.textContent = `${server.name}: ${words}`;
      if (this.staff && server.last_error) item.title = server.last_error;
      this.serverList.append(item);
    }
    this.serverCount = { all: all.length, total: counted.length, serving: counted.filter((s) => SERVING.has(s.status)).length };
    this.serversToggleText.textContent = this.serversText();
    this.serversToggle.hidden = false;
    this.serversToggle.classList.toggle("bad", this.serverCount.serving < this.serverCount.total);
    this.serversToggle.classList.toggle("off", this.serverCount.total === 0); // none to use: no green

    this.paintSummary();
  }

  // "3 servers ready", "2/3 servers ready", "no MCP servers": the summary of the servers part.
  serversText() {
    const count = this.serverCount;
    if (!count.total) return count.all ? "MCP servers off" : "no MCP servers";
    return count.serving === count.total
      ? `${count.total} server${count.total === 1 ? "" : "s"} ready`
      : `${count.serving}/${count.total} servers ready`;
  }

  // The conversation's usage (the `conversation` frame): totals, and how many answers came without.
  usage(usage) {
    const target = this.usageEl;
    this.usageShort = "";
    if (!usage || typeof usage.answers !== "number" || usage.answers === 0) {
      target.hidden = true;
      target.textContent = "";
      this.paintSummary();
      return;
    }
    const counted = usage.answers - (usage.answers_without_usage || 0);
    let text;
    if (counted === 0) {
      text = "tokens: not reported by the model endpoint";
      target.title = "The endpoint sent no usage for any answer of this conversation.";
      this.usageShort = "tokens: n/a";
    } else {
      const total = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
      text = `tokens: ${formatCount(total)} (${formatCount(usage.prompt_tokens)} in, ${formatCount(usage.completion_tokens)} out)`;
      target.title = `${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens over ${counted} answer(s)`;
      this.usageShort = `${formatCount(total)} tokens`;
      if (usage.answers_without_usage) {
        text += ` · ${usage.answers_without_usage} answer${usage.answers_without_usage === 1 ? "" : "s"} without usage`;
      }
    }
    target.textContent = text;
    target.hidden = false;
    this.paintSummary();
  }

  // The person's daily budget (the `conversation` object's `budget`; null: none applies to them).
  // From 80 % on it reads in the warning colour, and the phone's summary names it too.
  budget(budget) {
    const target = this.budgetEl;
    this.budgetShort = "";
    const valid = budget && Number.isFinite(budget.used) && Number.isFinite(budget.tokens_per_day) && budget.tokens_per_day > 0;
    target.hidden = !valid;
    target.classList.remove("near", "spent");
    if (!valid) {
      target.textContent = "";
      this.paintSummary();
      return;
    }
    const { used, tokens_per_day: limit } = budget;
    target.textContent = `${used.toLocaleString("en")} of ${limit.toLocaleString("en")} tokens today`;
    target.title = "Your daily token budget (it resets at midnight UTC)";
    if (used >= limit) target.classList.add("spent");
    else if (used >= limit * 0.8) target.classList.add("near");
    if (used >= limit * 0.8) this.budgetShort = `${formatCount(used)} of ${formatCount(limit)} today`;
    this.paintSummary();
  }

  // The phone's one line: short forms of the parts; the full text is the button's tooltip. A part
  // in trouble has its own red dot, before its own words: a server down never reads as the model.
  paintSummary() {
    const parts = [];
    const modelText = this.modelEl.textContent.replace(/^model: /, "");
    if (modelText) parts.push([modelText, this.modelEl.classList.contains("bad")]);
    if (this.usageShort) parts.push([this.usageShort, false]);
    if (this.budgetShort) parts.push([this.budgetShort, false]);
    const count = this.serverCount;
    if (count) parts.push([this.serversText(), count.serving < count.total]);
    const nodes = [];
    for (const [text, bad] of parts) {
      if (nodes.length) nodes.push(" · ");
      nodes.push(el("span", bad ? "summary-part bad" : "summary-part", text));
    }
    this.summaryText.replaceChildren(...nodes);
    if (!this.root.classList.contains("expanded")) this.summary.title = "Show the status details";
  }
}
