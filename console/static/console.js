// The console's only script: live updates. Pages work without it; with
// it, an element with data-stream listens to the gateway's event stream
// and takes the HTML each event carries (rendered and escaped by the
// gateway, as the page itself was).
"use strict";
// human is a duration in seconds as the gateway writes it: 45s, 12m,
// 3h05m, 2d04h.
function human(s) {
  s = Math.max(0, Math.floor(s));
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 48 * 3600) return Math.floor(s / 3600) + "h" + pad(Math.floor(s / 60) % 60) + "m";
  return Math.floor(s / 86400) + "d" + pad(Math.floor(s / 3600) % 24) + "h";
}

// Uptimes ([data-since]) count on between updates.
function tick() {
  document.querySelectorAll("time[data-since]").forEach(function (t) {
    var since = Date.parse(t.getAttribute("datetime"));
    if (!isNaN(since)) t.textContent = human((Date.now() - since) / 1000);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  tick();
  setInterval(tick, 5000);
  // A build's log opens at its end, where a build's news is.
  document.querySelectorAll("pre[data-tail]").forEach(function (log) { log.scrollTop = log.scrollHeight; });
  document.querySelectorAll("[data-stream]").forEach(function (el) {
    if (!window.EventSource) return;
    var es = new EventSource(el.getAttribute("data-stream"));
    // The event that carries this element's HTML (data-event; a build's
    // page has "build"), else the clusters table.
    es.addEventListener(el.getAttribute("data-event") || "clusters", function (ev) {
      // Keep what the person is typing: no update while a field of this
      // element has the focus; the next event brings the news.
      if (el.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
      // A log the person scrolled to its end stays at its end.
      var log = el.querySelector("pre[data-tail]");
      var atEnd = !log || log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      el.innerHTML = ev.data;
      log = el.querySelector("pre[data-tail]");
      if (log && atEnd) log.scrollTop = log.scrollHeight;
      el.setAttribute("data-updated", String(Date.now()));
    });
    es.addEventListener("signedout", function () {
      es.close();
      location.reload();
    });
  });
});
