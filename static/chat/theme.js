// Light, dark, or the system's choice: applied at once (data-theme on <html>, which the CSS
// reads) and remembered for the person with POST /prefs/theme/.

import { announce, post } from "./dom.js";

export function setupTheme() {
  const group = document.getElementById("theme-switch");
  if (!group) return;
  group.addEventListener("change", async (event) => {
    const theme = event.target.value;
    if (!["system", "light", "dark"].includes(theme)) return;
    document.documentElement.dataset.theme = theme;
    try {
      await post(group.dataset.url, { theme });
    } catch (error) {
      announce(`The theme applies to this page only: it could not be saved (${error.message}).`);
    }
  });
}
