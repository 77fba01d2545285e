// The conversation's websocket (docs/protocol.md): connects, hands every frame on, reconnects
// with backoff after a drop, and stops for good on 4401 (logged out) and 4403 (not yours).
//
// Lifecycle: start() opens it; stop() closes it and cancels any pending reconnect (leaving a
// conversation in place); a turn does not belong to the socket, so closing never stops a turn.

export class Connection {
  constructor(path, { onFrame, onState, onOpen }) {
    this.path = path;
    this.onFrame = onFrame;
    this.onState = onState;
    this.onOpen = onOpen || (() => {});
    this.ws = null;
    this.retry = 0;
    this.timer = null;
    this.stopped = false;
  }

  get isOpen() {
    return Boolean(this.ws && this.ws.readyState === WebSocket.OPEN);
  }

  start() {
    this.stopped = false;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}${this.path}`);
    this.ws = ws;
    this.onState("connecting…", false);
    ws.addEventListener("open", () => {
      this.retry = 0;
      this.onState("connected", true);
      this.onOpen();
    });
    ws.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        console.error("bad frame", error);
        return;
      }
      this.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      if (event.code === 4401) {
        this.stopped = true;
        this.onState("logged out — reload the page to log in", false);
        return;
      }
      if (event.code === 4403) {
        this.stopped = true;
        this.onState("this conversation is not yours", false);
        return;
      }
      // Backoff with full jitter: the n-th try waits 0.25 s plus a random part of
      // min(10 s, 2 s · 2^n), so the tabs of a restarted server come back spread over seconds
      // rather than all at once (the first tries of 300 tabs: about 150 a second, not 300 at once).
      const ceiling = Math.min(10000, 2000 * 2 ** this.retry);
      const delay = 250 + Math.random() * ceiling;
      this.retry += 1;
      this.onState(`disconnected — reconnecting in ${Math.max(1, Math.round(delay / 1000))} s`, false);
      this.timer = setTimeout(() => this.start(), delay);
    });
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000);
  }

  // Send a frame; false when the socket is not open (nothing is queued).
  send(frame) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }
}
