// The console's only script: live updates. Pages work without it; with
// it, the page's element with data-stream listens to the gateway's event
// stream (one per page) and each element with data-on="EVENT" takes the
// HTML that event carries (rendered and escaped by the gateway, as the
// page itself was); a cluster's logs may follow (new lines appended as
// text), as a build's page follows its build; the new-cluster form's
// estimate follows its options.
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
  // A build's log opens at its end, where its news is.
  document.querySelectorAll("pre[data-tail]").forEach(function (log) { log.scrollTop = log.scrollHeight; });
  stream();
  estimate();
});

function stream() {
  var root = document.querySelector("[data-stream]");
  if (!root || !window.EventSource) return;
  var follow = document.querySelector("input[data-follow]");
  var logs = document.querySelector("[data-logs]");
  var es = null;
  function put(name) {
    return function (ev) {
      document.querySelectorAll('[data-on="' + name + '"]').forEach(function (el) {
        // Keep what the person is typing: no update while a field of
        // this element has the focus; the next event brings the news.
        var f = document.activeElement;
        if (f && el.contains(f) && /^(INPUT|SELECT|TEXTAREA)$/.test(f.tagName)) return;
        // A log read at its end (a build's) stays at its end.
        var tail = el.querySelector("pre[data-tail]");
        var end = !tail || tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 4;
        el.innerHTML = ev.data;
        tail = el.querySelector("pre[data-tail]");
        if (tail && end) tail.scrollTop = tail.scrollHeight;
        el.setAttribute("data-updated", String(Date.now()));
      });
    };
  }
  function atEnd() {
    return logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
  }
  function open() {
    if (es) es.close();
    var url = root.getAttribute("data-stream");
    if (follow && follow.checked) {
      url += "&follow=1&tail=" + encodeURIComponent(follow.getAttribute("data-follow"));
    }
    es = new EventSource(url);
    es.addEventListener("clusters", put("clusters"));
    es.addEventListener("cluster", put("cluster"));
    es.addEventListener("build", put("build"));
    es.addEventListener("builds", put("builds"));
    es.addEventListener("logs-reset", function (ev) {
      logs.textContent = ev.data ? ev.data + "\n" : "";
      logs.scrollTop = logs.scrollHeight;
      logs.setAttribute("data-updated", String(Date.now()));
    });
    es.addEventListener("logs", function (ev) {
      var end = atEnd();
      logs.appendChild(document.createTextNode(ev.data + "\n"));
      if (end) logs.scrollTop = logs.scrollHeight;
      logs.setAttribute("data-updated", String(Date.now()));
    });
    es.addEventListener("signedout", function () {
      es.close();
      location.reload();
    });
  }
  if (follow && logs) {
    follow.closest("label").hidden = false;
    follow.addEventListener("change", open);
  }
  open();
}

function estimate() {
  var form = document.querySelector("form[data-estimate]");
  var box = document.getElementById("estimate");
  if (!form || !box || !window.fetch || !window.URLSearchParams) return;
  var timer = null;
  var asked = 0;
  function check() {
    var n = ++asked;
    var q = new URLSearchParams(new FormData(form)).toString();
    fetch(form.getAttribute("data-estimate") + "?" + q, { credentials: "same-origin" })
      .then(function (r) {
        // Only the estimate itself, not (say) a sign-in page.
        if (!r.ok || r.headers.get("X-Console-Fragment") !== "estimate") throw new Error("no estimate");
        return r.text();
      })
      .then(function (html) {
        if (n !== asked) return; // a later answer is on its way
        box.innerHTML = html;
        box.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function () {});
  }
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(check, 250);
  }
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
}
