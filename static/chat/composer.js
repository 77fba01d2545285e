// The composer: a text box that grows with its text (up to a limit, then scrolls), Enter sends,
// Shift+Enter adds a line, Esc stops the running turn; Send turns into Stop while a turn runs.

export class Composer {
  constructor({ form, input, sendButton, stopButton, onSend, onStop }) {
    this.form = form;
    this.input = input;
    this.sendButton = sendButton;
    this.stopButton = stopButton;
    this.onSend = onSend;
    this.onStop = onStop;
    this.running = false;
    this.busy = false;

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    input.addEventListener("input", () => this.autosize());
    stopButton.addEventListener("click", () => this.onStop());
    this.autosize();
    sendButton.disabled = false; // the page sends over its socket: nothing to send before this runs
  }

  async submit() {
    const text = this.input.value;
    if (!text.trim() || this.running || this.busy) return;
    this.busy = true;
    try {
      if (await this.onSend(text)) {
        this.input.value = "";
        this.autosize();
      }
    } finally {
      this.busy = false;
    }
  }

  // Grow with the text; the CSS max-height caps it and the box scrolls from there.
  autosize() {
    const input = this.input;
    input.style.height = "auto";
    const limit = parseFloat(getComputedStyle(input).maxHeight) || Infinity;
    const height = Math.min(input.scrollHeight + 2, limit);
    input.style.height = `${height}px`;
    input.style.overflowY = input.scrollHeight + 2 > limit ? "auto" : "hidden";
  }

  setRunning(running) {
    this.running = running;
    const hadFocus = document.activeElement === this.sendButton || document.activeElement === this.stopButton;
    this.stopButton.hidden = !running;
    this.sendButton.hidden = running;
    if (hadFocus) (running ? this.stopButton : this.sendButton).focus();
  }

  focus() {
    this.input.focus({ preventScroll: true });
  }
}
