// Tool calls waiting for the person's approval (writeTools / trusted in mcp.json), as in
// docs/protocol.md: an `approval` frame shows a card under the tool call's card, in every tab;
// the first answer decides and `approval_end` turns every tab's card into its outcome.
//
// The server name, tool name, title and arguments come from a server or the model: they are
// untrusted text and only ever go in with textContent (dom.js `el`), never as HTML. The hints
// are what the server declared about its own tool: shown as such, never as a guarantee.

import { announce, el, expiresText, formatCount, icon, showText } from "./dom.js";
import { addStep, showWaiting } from "./toolcards.js";

const OUTCOMES = {
  approved: "Approved: the call ran.",
  allowed: "Allowed for this conversation: the call ran without asking.",
  denied: "Denied: the tool was not called.",
  expired: "No answer in time: denied, the tool was not called.",
  stopped: "Stopped with the turn: the tool was not called.",
};

let uniqueId = 0;

// One badge per hint the server declared; a write tool that says nothing about destruction may destroy.
function hintBadges(hints) {
  const badges = [];
  const add = (text, warning) => badges.push({ text, warning: Boolean(warning) });
  if (hints.readOnly === true) add("read-only (declared)");
  if (hints.readOnly === false) add("writes");
  if (hints.destructive === true) add("destructive", true);
  else if (hints.destructive === false) add("not destructive");
  else if (hints.readOnly !== true) add("may be destructive (not declared)", true);
  if (hints.idempotent === true) add("idempotent: safe to repeat");
  if (hints.idempotent === false) add("not idempotent");
  if (hints.openWorld === true) add("reaches outside systems");
  if (hints.openWorld === false) add("closed world");
  return badges;
}

function argumentsText(value) {
  try {
    return JSON.stringify(value ?? {}, null, 2);
  } catch {
    return String(value);
  }
}

// The card of one pending approval; `send(frame)` returns false when not connected.
function renderApproval(approval, send) {
  uniqueId += 1;
  const headingId = `approval-heading-${uniqueId}`;
  const card = el("section", "approval");
  card.dataset.id = String(approval.id);
  card.setAttribute("aria-labelledby", headingId);
  card.tabIndex = -1; // focusable as a whole, so a keyboard user can be taken to it

  // A view (MCP Apps) asked, not the model: the card says so (the view cannot answer it).
  const question = approval.from_view ? "The view asks to run this tool. Approve?" : "Approve this tool call?";
  const heading = el("h3", "approval-heading", question);
  heading.id = headingId;
  card.append(heading);

  const what = el("p", "approval-tool");
  what.append(el("span", "approval-server", approval.server), el("span", "approval-sep", " · "));
  what.append(el("code", "approval-name", approval.tool));
  if (approval.title) what.append(el("span", "approval-title", ` (${approval.title})`));
  card.append(what);

  const badges = hintBadges(approval.hints || {});
  if (badges.length) {
    const list = el("ul", "approval-hints");
    list.setAttribute("aria-label", "What the server says about this tool");
    for (const badge of badges) list.append(el("li", badge.warning ? "hint warning" : "hint", badge.text));
    card.append(list);
  }
  if (approval.reason) card.append(el("p", "approval-reason", `Asked because: ${approval.reason}`));

  const argsLabel = el("p", "approval-args-label", "Arguments");
  const argsId = `approval-args-${uniqueId}`;
  argsLabel.id = argsId;
  // Arguments too large for a frame come as the beginning of their JSON text (docs/protocol.md).
  const args = el(
    "pre",
    "approval-args",
    approval.arguments_length
      ? `${approval.arguments}\n… (${formatCount(approval.arguments_length)} characters in all; the rest is not shown)`
      : argumentsText(approval.arguments),
  );
  args.tabIndex = 0; // long arguments scroll: reachable with the keyboard
  args.setAttribute("aria-labelledby", argsId);
  card.append(argsLabel, args);

  const error = el("p", "approval-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  card.append(error);

  const buttons = el("div", "approval-buttons");
  const approve = el("button", "approve", "Approve");
  const deny = el("button", "deny", "Deny");
  const remember = el("button", "remember", "Allow this tool for this conversation");
  for (const button of [approve, deny, remember]) button.type = "button";
  buttons.append(approve, deny, remember);
  card.append(buttons);
  const expires = expiresText(approval.expires_at, "Denied at", "if nobody answers");
  if (expires) card.append(el("p", "note approval-expires", expires));

  const answer = (decision, rememberIt) => {
    error.hidden = true;
    const frame = { type: "approval_answer", id: approval.id, decision, remember: rememberIt };
    if (send(frame)) card.classList.add("sending");
    else showApprovalError(card, "Not connected: try again in a moment.");
  };
  approve.addEventListener("click", () => answer("approve", false));
  deny.addEventListener("click", () => answer("deny", false));
  remember.addEventListener("click", () => answer("approve", true));
  return card;
}

function showApprovalError(card, message) {
  const error = card.querySelector(".approval-error");
  card.classList.remove("sending");
  showText(error, message);
}

// Decided: the card folds to one line, its outcome; what was asked opens from that line.
function endApproval(card, frame) {
  let text = OUTCOMES[frame.decision] || `Closed (${frame.decision}).`;
  if (frame.decision === "approved" && frame.remember) {
    text = "Approved, and allowed for the rest of this conversation.";
  }
  card.classList.remove("sending");
  card.classList.add("decided", `decision-${frame.decision}`);
  for (const node of card.querySelectorAll(".approval-buttons, .approval-expires, .approval-error")) node.remove();
  const asked = el("details", "approval-asked");
  const line = el("summary", "approval-line");
  const outcome = el("span", "approval-outcome", text);
  outcome.setAttribute("role", "status");
  line.append(icon("chevron"), outcome);
  asked.append(line, ...[...card.childNodes]); // (a copy: appending moves them out of the card)
  card.replaceChildren(asked);
  card.querySelector(".approval-heading").textContent = "What was asked";
  return text;
}

// The page's pending cards, by id: placed under their tool call's card, ended once.
export class Approvals {
  constructor({ thread, send }) {
    this.thread = thread;
    this.send = send;
    this.cards = new Map();
  }

  reset() {
    this.cards.clear();
  }

  show(approval) {
    if (this.cards.has(approval.id)) return;
    const wasNearBottom = this.thread.nearBottom();
    const card = renderApproval(approval, this.send);
    const anchor = this.thread.card(approval.call_id);
    if (anchor) addStep(anchor, card); // inside the call's card: asked before it ran
    else this.thread.container.append(card);
    this.cards.set(approval.id, card);
    this.thread.keepScrolled(wasNearBottom);
    announce(`Approval needed: ${approval.server} ${approval.tool}.`);
    if (wasNearBottom && !document.activeElement?.closest("form, dialog")) card.focus({ preventScroll: true });
  }

  end(frame) {
    const card = this.cards.get(frame.id);
    if (!card) return;
    this.cards.delete(frame.id);
    announce(endApproval(card, frame));
    const toolCard = card.closest(".tool-card");
    if (toolCard) showWaiting(toolCard);
  }

  // An error frame about an answer: shown in the card it was for (true), else left to the page.
  error(frame) {
    if (frame.code !== "bad_approval" && frame.code !== "unknown_approval") return false;
    const card = [...this.cards.values()].find((node) => node.classList.contains("sending"));
    if (!card) return false;
    showApprovalError(card, frame.message);
    return true;
  }
}
