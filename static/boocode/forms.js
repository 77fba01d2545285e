// The password pages: the first field the server marked invalid gets the focus, else the first field.
"use strict";
(() => {
  const field = document.querySelector('main form [aria-invalid="true"]') ||
    document.querySelector("main form input:not([type=hidden])");
  if (field) field.focus();
})();
