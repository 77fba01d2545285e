// The status line: the socket, the model (as the last status frame says, so "(unreachable)"
// goes as soon as the server sees the model again), the MCP servers, and the conversation's
// token usage.

import { el, formatCount } from "./dom.js";

// Statuses that read better in words (OAuth: see docs/configuration.md, "Signing in").
const STATUS_WORDS = { auth_required: "needs a sign-in", per_user: "per person (Your accounts)" };

export class StatusLine {
  constructor() {
    this.connEl = document.getElementById("connection-state");
    this.modelEl = document.getElementById("model-state");
    this.serversEl = document.getElementById("server-states");
    this.usageEl = document.getElementById("conversation-usage");
  }

  connection(text, good) {
    this.connEl.textContent = text;
    this.connEl.className = `conn ${text ? (good ? "good" : "bad") : ""}`;
  }

  render(frame) {
    const model = frame.model || {};
    const modelEl = this.modelEl;
    if (!model.configured) {
      modelEl.textContent = "no model configured";
      modelEl.className = "model bad";
      modelEl.title = "Set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL";
    } else if (model.last_error) {
      modelEl.textContent = `model: ${model.name} (unreachable)`;
      modelEl.className = "model bad";
      modelEl.title = model.last_error;
    } else {
      modelEl.textContent = `model: ${model.name}`;
      modelEl.className = "model";
      modelEl.title = "";
    }
    this.serversEl.replaceChildren();
    const servers = frame.servers || [];
    if (!servers.length) this.serversEl.append(el("span", "server none", "no MCP servers"));
    for (const server of servers) {
      const item = el("span", `server server-${server.status}`);
      item.dataset.name = server.name;
      const words = STATUS_WORDS[server.status] || server.status;
      item.textContent = `${server.name}: ${words}` + (server.status === "ready" ? ` (${server.tool_count} tools)` : "");
      if (server.last_error) item.title = server.last_error;
      this.serversEl.append(item);
    }
  }

  // The conversation's usage (the `conversation` frame): totals, and how many answers came without.
  usage(usage) {
    const target = this.usageEl;
    if (!usage || typeof usage.answers !== "number" || usage.answers === 0) {
      target.hidden = true;
      target.textContent = "";
      return;
    }
    const counted = usage.answers - (usage.answers_without_usage || 0);
    let text;
    if (counted === 0) {
      text = "tokens: not reported by the model endpoint";
      target.title = "The endpoint sent no usage for any answer of this conversation.";
    } else {
      const total = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
      text = `tokens: ${formatCount(total)} (${formatCount(usage.prompt_tokens)} in, ${formatCount(usage.completion_tokens)} out)`;
      target.title = `${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens over ${counted} answer(s)`;
      if (usage.answers_without_usage) {
        text += ` · ${usage.answers_without_usage} answer${usage.answers_without_usage === 1 ? "" : "s"} without usage`;
      }
    }
    target.textContent = text;
    target.hidden = false;
  }
}
