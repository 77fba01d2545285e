// The first script of every view document (MCP Apps), put there by boocode/chat/web/app_views.py
// before anything of the view's own. What it closes cannot be reopened by the view's scripts,
// which run after it in the same realm; docs/apps.md and docs/security.md say what it promises.
//
// 1. WebRTC: every RTC* interface (RTCPeerConnection, RTCDataChannel, RTCIceTransport, ...) is
//    deleted from the view's window. Nothing can bring a deleted interface object back, and no
//    other realm is reachable: the document is sandboxed without allow-same-origin, so every frame
//    it makes (about:blank, srcdoc) has an origin of its own that the view cannot script; and
//    workers are refused by the policy (worker-src 'none').
// 2. Nested documents that run scripts of their own (an <iframe srcdoc>, a javascript: URL) would
//    get fresh RTC* interfaces: a view that declares no frame origins keeps no frame at all; one
//    that does keeps only frames of http(s) addresses (the policy's frame-src names which). The
//    check runs when the document or any of its shadow roots changes (a microtask: before a nested
//    document can load), after every call that parses HTML, and counts the window's frames: a
//    frame it cannot see (inside a closed shadow root) stops the whole view at once.
//    Declarative shadow roots are disabled (their attribute renamed) in the document as served
//    and in what the parsing calls receive, so every shadow root is made by attachShadow, which
//    this script watches.
//
// Every built-in it uses is taken before the view runs, so that redefining a prototype's method
// or getter later does not change what this script sees.
(() => {
  "use strict";
  for (const name of Object.getOwnPropertyNames(window)) {
    if (/^(webkit|moz)?RTC/.test(name)) delete window[name];
  }

  try {
    guardFrames();
  } catch {
    // A browser without what the watch needs: the view does not run at all (fail closed).
    window.stop();
    document.documentElement?.remove();
  }

  // (Inside the same scope: nothing of it is left on the view's window.)
  function guardFrames() {
    const ALLOW_FRAMES = __ALLOW_FRAMES__;
    const uncurry = Function.prototype.bind.bind(Function.prototype.call);
    const describe = Object.getOwnPropertyDescriptor;
    const define = Object.defineProperty;
    const getter = (target, name) => uncurry(describe(target, name).get);
    const doc = document;
    const FRAMES = "iframe, frame, object, embed, fencedframe, portal";
    const frameCount = getter(window, "length");
    const documentElement = getter(Document.prototype, "documentElement");
    const selectInDocument = uncurry(Document.prototype.querySelectorAll);
    const selectInRoot = uncurry(DocumentFragment.prototype.querySelectorAll);
    const listLength = getter(NodeList.prototype, "length");
    const item = uncurry(NodeList.prototype.item);
    const localName = getter(Element.prototype, "localName");
    const getAttribute = uncurry(Element.prototype.getAttribute);
    const hasAttribute = uncurry(Element.prototype.hasAttribute);
    const remove = uncurry(Element.prototype.remove);
    const exec = uncurry(RegExp.prototype.exec);
    const observe = uncurry(MutationObserver.prototype.observe);
    const roots = { __proto__: null };
    let rootCount = 0;
    const WEB_ADDRESS = /^\s*https?:\/\//i;

    function kept(frame) {
      if (!ALLOW_FRAMES) return false;
      const name = localName(frame);
      if ((name !== "iframe" && name !== "frame") || hasAttribute(frame, "srcdoc")) return false;
      const src = getAttribute(frame, "src");
      return src === null || exec(WEB_ADDRESS, src) !== null; // (about:blank: its own origin, no script)
    }

    function sweepList(list) {
      let keep = 0;
      for (let index = listLength(list) - 1; index >= 0; index--) {
        const frame = item(list, index);
        if (kept(frame)) keep += 1;
        else remove(frame);
      }
      return keep;
    }

    // Frames the view may not keep are removed (their documents go with them); a frame left over
    // that none of the watched trees shows stops the view.
    function sweep() {
      let keep = sweepList(selectInDocument(doc, FRAMES));
      for (let index = 0; index < rootCount; index++) keep += sweepList(selectInRoot(roots[index], FRAMES));
      if (frameCount(window) > keep) {
        const root = documentElement(doc);
        if (root) remove(root);
      }
    }

    const observer = new MutationObserver(sweep);
    const WATCH = { __proto__: null, childList: true, subtree: true, attributes: true };
    observe(observer, doc, WATCH);
    function watch(root) {
      observe(observer, root, WATCH);
      define(roots, rootCount, { value: root });
      rootCount += 1;
    }

    const attachRoot = uncurry(Element.prototype.attachShadow);
    define(Element.prototype, "attachShadow", {
      value: function attachShadow(init) {
        const root = attachRoot(this, init);
        watch(root);
        sweep();
        return root;
      },
      writable: true,
      configurable: true,
    });

    // Calls that parse HTML: their declarative shadow roots are disabled, then the frames checked.
    const DECLARATIVE = /shadowroot(mode|clonable|delegatesfocus|serializable)/gi;
    define(DECLARATIVE, "flags", { value: "gi" }); // (read by replace: not the prototype's getters)
    define(DECLARATIVE, "exec", { value: RegExp.prototype.exec });
    const replace = uncurry(RegExp.prototype[Symbol.replace]);
    const inert = (html) => replace(DECLARATIVE, html, "inert$&");
    // (write and writeln take any number of strings: they are joined, as the calls would join them)
    function guardParser(target, name, joined) {
      const found = describe(target, name);
      if (!found || typeof found.value !== "function") return;
      const original = uncurry(found.value);
      define(target, name, {
        value: {
          [name](html, options) {
            let text = `${html}`;
            if (joined) for (let index = 1; index < arguments.length; index++) text += `${arguments[index]}`;
            try {
              return joined ? original(this, inert(text)) : original(this, inert(text), options);
            } finally {
              sweep();
            }
          },
        }[name],
        writable: true,
        configurable: true,
      });
    }
    for (const name of ["setHTMLUnsafe", "setHTML"]) {
      guardParser(Element.prototype, name, false);
      guardParser(ShadowRoot.prototype, name, false);
    }
    for (const name of ["parseHTMLUnsafe", "parseHTML"]) guardParser(Document, name, false);
    for (const name of ["write", "writeln"]) guardParser(Document.prototype, name, true);
  }
})();
