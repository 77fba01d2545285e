// Menus and popovers anchored to a button: placed inside the viewport (a phone's too), closed by
// Esc, a click elsewhere or Tab, with focus returned to the button that opened them.

// Place `popup` (position: fixed) under `anchor`, right-aligned with it, kept 8 px inside the viewport.
function placeNear(popup, anchor) {
  popup.hidden = false;
  const box = anchor.getBoundingClientRect();
  const width = popup.offsetWidth;
  const height = popup.offsetHeight;
  const viewWidth = document.documentElement.clientWidth;
  const viewHeight = window.innerHeight;
  let left = box.right - width;
  if (left < 8) left = box.left;
  left = Math.max(8, Math.min(left, viewWidth - width - 8));
  let top = box.bottom + 4;
  if (top + height > viewHeight - 8) top = Math.max(8, box.top - height - 4);
  popup.style.left = `${Math.round(left)}px`;
  popup.style.top = `${Math.round(top)}px`;
}

class Popup {
  constructor(element) {
    this.element = element;
    this.anchor = null;
    this.onDocumentPointer = (event) => {
      if (!this.element.contains(event.target) && !(this.anchor && this.anchor.contains(event.target))) {
        this.close({ restoreFocus: false });
      }
    };
    this.onResize = () => this.close({ restoreFocus: false });
    element.addEventListener("keydown", (event) => this.keydown(event));
  }

  get isOpen() {
    return !this.element.hidden;
  }

  open(anchor) {
    if (this.isOpen) this.close({ restoreFocus: false });
    this.anchor = anchor;
    anchor.setAttribute("aria-expanded", "true");
    placeNear(this.element, anchor);
    document.addEventListener("pointerdown", this.onDocumentPointer, true);
    window.addEventListener("resize", this.onResize);
  }

  close({ restoreFocus = true } = {}) {
    if (!this.isOpen) return;
    this.element.hidden = true;
    document.removeEventListener("pointerdown", this.onDocumentPointer, true);
    window.removeEventListener("resize", this.onResize);
    const anchor = this.anchor;
    this.anchor = null;
    if (anchor) {
      anchor.setAttribute("aria-expanded", "false");
      if (restoreFocus && anchor.isConnected) anchor.focus();
    }
  }

  toggle(anchor) {
    if (this.isOpen && this.anchor === anchor) this.close();
    else this.open(anchor);
  }

  keydown(event) {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      this.close();
    }
  }
}

// A menu of role=menuitem buttons and links: arrow keys, Home/End move; Tab closes.
export class Menu extends Popup {
  items() {
    return [...this.element.querySelectorAll("[role=menuitem]:not([hidden])")];
  }

  open(anchor) {
    super.open(anchor);
    const first = this.items()[0];
    if (first) first.focus();
  }

  keydown(event) {
    const items = this.items();
    const index = items.indexOf(document.activeElement);
    let next = null;
    if (event.key === "ArrowDown") next = items[(index + 1) % items.length];
    else if (event.key === "ArrowUp") next = items[(index - 1 + items.length) % items.length];
    else if (event.key === "Home") next = items[0];
    else if (event.key === "End") next = items[items.length - 1];
    else if (event.key === "Tab") this.close({ restoreFocus: false });
    if (next) {
      event.preventDefault();
      next.focus();
      return;
    }
    super.keydown(event);
  }
}

// A non-modal popover (a panel of controls): focus goes to its first control.
export class Popover extends Popup {
  open(anchor) {
    super.open(anchor);
    const first =
      this.element.querySelector("input:checked") || this.element.querySelector("input, button, select, a[href]");
    if (first) first.focus();
  }

  keydown(event) {
    if (event.key === "Tab") {
      // The panel holds one group of choices: Tab leaves it, back at the button that opened it.
      event.preventDefault();
      this.close();
      return;
    }
    super.keydown(event);
  }
}
