// The sign-in page of an OAuth provider is on another origin: the page's CSP (form-action 'self')
// does not let a form's redirect go there, so BooCode answers Connect with this page and
// follows the link at once (a link is a navigation, not a form submission).
"use strict";
const link = document.getElementById("oauth-continue");
if (link) window.location.assign(link.href);
