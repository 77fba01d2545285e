// The conversation list: a drawer with a backdrop at phone width, titles grouped by date,
// search (/api/search/), and each conversation's menu (rename, export as Markdown or JSON,
// delete) that stays inside the viewport.
//
// Titles, snippets and search words are text only.

import { announce, el, getJSON, post, showText } from "./dom.js";
import { Menu } from "./popup.js";

const SEARCH_DELAY = 200;

export class Sidebar {
  constructor({ getConversation, onDeletedCurrent, onRenamed, onNewConversation }) {
    this.sidebar = document.getElementById("sidebar");
    this.toggleButton = document.getElementById("sidebar-toggle");
    this.closeButton = document.getElementById("sidebar-close");
    this.backdrop = document.getElementById("sidebar-backdrop");
    this.main = document.querySelector(".main");
    this.groups = document.getElementById("conversation-groups");
    this.searchInput = document.getElementById("search-input");
    this.results = document.getElementById("search-results");
    this.getConversation = getConversation;
    this.onDeletedCurrent = onDeletedCurrent;
    this.onRenamed = onRenamed;
    this.menu = new Menu(document.getElementById("menu"));
    this.menuFor = null;
    this.searchTimer = null;
    this.searchAbort = null;
    this.drawerQuery = window.matchMedia("(max-width: 799px)");

    this.toggleButton.addEventListener("click", () => (this.isOpen ? this.close() : this.open()));
    this.toggleButton.hidden = false; // shown once it works (the drawer needs this script)
    this.closeButton.addEventListener("click", () => this.close());
    this.backdrop.addEventListener("click", () => this.close());
    this.sidebar.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.isOpen && !event.defaultPrevented) {
        event.preventDefault();
        this.close();
      }
    });
    this.drawerQuery.addEventListener("change", () => this.close({ restoreFocus: false }));
    document.getElementById("new-conversation-form").addEventListener("submit", (event) => {
      if (onNewConversation()) {
        event.preventDefault();
        this.close({ restoreFocus: false });
      }
    });

    // One menu serves every conversation (and the one in the top bar).
    document.addEventListener("click", (event) => {
      const button = event.target.closest(".conv-menu-button");
      if (!button || button.hidden) return;
      this.menuFor = Number(button.dataset.id);
      this.prepareMenu(this.menuFor);
      this.menu.toggle(button);
    });
    this.menu.element.addEventListener("click", (event) => this.menuAction(event));
    this.setupDialogs();
    this.setupSearch();
  }

  // --- the drawer (phone width) ----------------------------------------------------------------
  get isDrawer() {
    return this.drawerQuery.matches;
  }

  get isOpen() {
    return this.sidebar.classList.contains("open");
  }

  open() {
    this.sidebar.classList.add("open");
    this.backdrop.hidden = false;
    this.toggleButton.setAttribute("aria-expanded", "true");
    if (this.isDrawer) {
      this.main.inert = true; // the page behind the drawer is out of reach until it closes
      this.sidebar.setAttribute("role", "dialog");
      this.sidebar.setAttribute("aria-modal", "true");
      const current = this.sidebar.querySelector(".conv-item.current .conv-link");
      (current || this.closeButton).focus({ preventScroll: true });
    }
  }

  close({ restoreFocus = true } = {}) {
    if (!this.isOpen) return;
    this.sidebar.classList.remove("open");
    this.backdrop.hidden = true;
    this.toggleButton.setAttribute("aria-expanded", "false");
    this.main.inert = false;
    this.sidebar.removeAttribute("role");
    this.sidebar.removeAttribute("aria-modal");
    if (restoreFocus && this.isDrawer) this.toggleButton.focus();
  }

  // --- the list --------------------------------------------------------------------------------
  item(id) {
    return this.groups.querySelector(`.conv-item[data-id="${id}"]`);
  }

  titleOf(id) {
    const link = this.item(id)?.querySelector(".conv-link");
    if (link) return link.textContent;
    return document.getElementById("conversation-title").textContent;
  }

  markCurrent(id) {
    for (const item of this.groups.querySelectorAll(".conv-item")) {
      const current = Number(item.dataset.id) === id;
      item.classList.toggle("current", current);
      const link = item.querySelector(".conv-link");
      if (current) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  // A conversation just created: first in "Today".
  add({ id, title, url }) {
    let list = null;
    const first = this.groups.querySelector(".conv-group");
    const flat = this.groups.querySelector(":scope > .conversation-list");
    if (first && first.querySelector(".conv-group-label")?.textContent === "Today") {
      list = first.querySelector(".conversation-list");
    } else if (flat && flat.querySelector(".conv-item")) {
      list = flat; // a server without date groups
    } else {
      flat?.remove(); // "No conversations yet."
      const section = el("section", "conv-group");
      const label = el("h2", "conv-group-label", "Today");
      label.id = "conv-group-today";
      section.setAttribute("aria-labelledby", label.id);
      list = el("ul", "conversation-list");
      section.append(label, list);
      this.groups.prepend(section);
    }
    const item = el("li", "conv-item");
    item.dataset.id = id;
    const link = el("a", "conv-link", title);
    link.href = url;
    link.dataset.id = id;
    const button = document.getElementById("conversation-menu-button").cloneNode(true);
    button.removeAttribute("id");
    button.hidden = false;
    button.dataset.id = id;
    button.setAttribute("aria-label", `Actions for ${title}`);
    button.setAttribute("aria-expanded", "false");
    item.append(link, button);
    list.prepend(item);
    this.markCurrent(id);
  }

  setTitle(id, title) {
    const item = this.item(id);
    if (!item) return;
    item.querySelector(".conv-link").textContent = title;
    item.querySelector(".conv-menu-button").setAttribute("aria-label", `Actions for ${title}`);
  }

  remove(id) {
    const item = this.item(id);
    if (!item) return;
    const list = item.parentElement;
    item.remove();
    if (!list.children.length) {
      const group = list.closest(".conv-group");
      if (group) group.remove();
    }
    if (!this.groups.querySelector(".conv-item")) {
      this.groups.replaceChildren();
      const empty = el("ul", "conversation-list");
      empty.append(el("li", "empty", "No conversations yet."));
      this.groups.append(empty);
    }
  }

  // --- the menu ------------------------------------------------------------------------------
  prepareMenu(id) {
    const items = this.menu.element;
    items.querySelector("[data-action=export-md]").href = `/c/${id}/export.md`;
    items.querySelector("[data-action=export-json]").href = `/c/${id}/export.json`;
  }

  menuAction(event) {
    const item = event.target.closest("[role=menuitem]");
    if (!item) return;
    const id = this.menuFor;
    const action = item.dataset.action;
    if (action === "rename") {
      event.preventDefault();
      this.menu.close({ restoreFocus: false });
      this.openRename(id);
    } else if (action === "delete") {
      event.preventDefault();
      this.menu.close({ restoreFocus: false });
      this.openDelete(id);
    } else {
      // Export links download; the menu closes.
      this.menu.close();
    }
  }

  setupDialogs() {
    this.renameDialog = document.getElementById("rename-dialog");
    this.deleteDialog = document.getElementById("delete-dialog");
    for (const dialog of [this.renameDialog, this.deleteDialog]) {
      dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
      dialog.addEventListener("close", () => {
        const opener = this.dialogOpener;
        this.dialogOpener = null;
        if (opener && opener.isConnected) opener.focus();
      });
    }
    this.renameDialog.querySelector("form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.rename();
    });
    this.deleteDialog.querySelector("form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.deleteConversation();
    });
  }

  opener(id) {
    const top = document.getElementById("conversation-menu-button");
    if (id === this.getConversation() && !top.hidden) return top;
    return this.item(id)?.querySelector(".conv-menu-button") || top;
  }

  showError(dialog, text) {
    showText(dialog.querySelector(".dialog-error"), text);
  }

  openRename(id) {
    this.dialogId = id;
    this.dialogOpener = this.opener(id);
    const input = this.renameDialog.querySelector("input");
    input.value = this.titleOf(id);
    this.showError(this.renameDialog, "");
    this.renameDialog.showModal();
    input.select();
  }

  async rename() {
    const id = this.dialogId;
    const input = this.renameDialog.querySelector("input");
    try {
      const { data } = await post(`/c/${id}/rename/`, { title: input.value });
      this.setTitle(id, data.title);
      this.onRenamed(id, data.title);
      this.renameDialog.close();
      announce(`Renamed to ${data.title}`);
    } catch (error) {
      this.showError(this.renameDialog, `Could not rename (${error.message}).`);
    }
  }

  openDelete(id) {
    this.dialogId = id;
    this.dialogOpener = this.opener(id);
    document.getElementById("delete-dialog-name").textContent = this.titleOf(id);
    this.showError(this.deleteDialog, "");
    this.deleteDialog.showModal();
    this.deleteDialog.querySelector("[data-close]").focus();
  }

  async deleteConversation() {
    const id = this.dialogId;
    try {
      await post(`/c/${id}/delete/`);
    } catch (error) {
      this.showError(this.deleteDialog, `Could not delete (${error.message}).`);
      return;
    }
    const title = this.titleOf(id);
    this.dialogOpener = null;
    this.deleteDialog.close();
    this.remove(id);
    announce(`Deleted ${title}`);
    if (id === this.getConversation()) this.onDeletedCurrent();
    else this.searchInput.focus();
  }

  // --- search --------------------------------------------------------------------------------
  setupSearch() {
    this.searchInput.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.search(), SEARCH_DELAY);
    });
    this.searchInput.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.searchInput.value) {
        event.preventDefault();
        event.stopPropagation();
        this.searchInput.value = "";
        this.search();
      } else if (event.key === "ArrowDown") {
        const first = this.results.querySelector("a");
        if (first && !this.results.hidden) {
          event.preventDefault();
          first.focus();
        }
      }
    });
    document.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") {
        event.preventDefault();
        if (this.isDrawer && !this.isOpen) this.open();
        this.searchInput.focus();
        this.searchInput.select();
      }
    });
  }

  async search() {
    const query = this.searchInput.value.trim();
    if (this.searchAbort) this.searchAbort.abort();
    if (!query) {
      this.results.hidden = true;
      this.results.replaceChildren();
      this.groups.hidden = false;
      return;
    }
    this.searchAbort = new AbortController();
    let data;
    try {
      data = await getJSON(`/api/search/?q=${encodeURIComponent(query)}`, this.searchAbort.signal);
    } catch (error) {
      if (error.name === "AbortError") return;
      this.showResults(query, null, `Search is not available (${error.message}).`);
      return;
    }
    this.showResults(query, Array.isArray(data.results) ? data.results : []);
  }

  showResults(query, results, problem) {
    this.groups.hidden = true;
    this.results.hidden = false;
    this.results.replaceChildren();
    if (problem) {
      this.results.append(el("p", "search-empty", problem));
      return;
    }
    if (!results.length) {
      this.results.append(el("p", "search-empty", `Nothing found for “${query}”.`));
      return;
    }
    const heading = el("h2", "conv-group-label", `${results.length} result${results.length === 1 ? "" : "s"}`);
    this.results.append(heading);
    for (const result of results) {
      const link = el("a", "search-result");
      link.href = `/c/${result.id}/`;
      link.append(el("span", "search-result-title", result.title));
      const snippet = el("span", "search-result-snippet");
      highlight(snippet, result.snippet || "", query);
      link.append(snippet);
      link.addEventListener("keydown", (event) => {
        const links = [...this.results.querySelectorAll("a")];
        const index = links.indexOf(link);
        if (event.key === "ArrowDown" && links[index + 1]) {
          event.preventDefault();
          links[index + 1].focus();
        } else if (event.key === "ArrowUp") {
          event.preventDefault();
          (links[index - 1] || this.searchInput).focus();
        }
      });
      this.results.append(link);
    }
  }
}

// The snippet as text, with the searched words marked.
function highlight(target, text, query) {
  const words = query.split(/\s+/).filter(Boolean).map((word) => word.toLowerCase());
  const lower = text.toLowerCase();
  let at = 0;
  while (at < text.length) {
    let next = -1;
    let length = 0;
    for (const word of words) {
      const found = lower.indexOf(word, at);
      if (found !== -1 && (next === -1 || found < next)) {
        next = found;
        length = word.length;
      }
    }
    if (next === -1) break;
    if (next > at) target.append(document.createTextNode(text.slice(at, next)));
    target.append(el("mark", null, text.slice(next, next + length)));
    at = next + length;
  }
  if (at < text.length) target.append(document.createTextNode(text.slice(at)));
}
