// The console's only script: live updates. Pages work without it; with
// it, an element with data-stream listens to the gateway's event stream
// and takes the HTML each event carries (rendered and escaped by the
// gateway, as the page itself was).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-stream]").forEach(function (el) {
    if (!window.EventSource) return;
    var es = new EventSource(el.getAttribute("data-stream"));
    es.addEventListener("clusters", function (ev) {
      // Keep what the person is typing: no update while a field of this
      // element has the focus; the next event brings the news.
      if (el.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
      el.innerHTML = ev.data;
      el.setAttribute("data-updated", String(Date.now()));
    });
    es.addEventListener("signedout", function () {
      es.close();
      location.reload();
    });
  });
});
