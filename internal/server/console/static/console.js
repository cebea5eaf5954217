// Helmr console: confirmations and live updates. No framework, no build
// step. The pages work without it; it adds confirmation dialogs, the
// live Session timeline (the API's event stream through the console's
// cookie-authenticated route) and live Command logs.
"use strict";

// Destructive forms ask first.
document.addEventListener("submit", function (e) {
  var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) e.preventDefault();
});

function el(tag, cls, text) {
  var n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

// The text of Content: text parts as they are, JSON parts as JSON.
function contentText(c) {
  if (!Array.isArray(c)) return c === undefined || c === null ? "" : JSON.stringify(c);
  return c.map(function (p) { return p.type === "text" ? p.text : JSON.stringify(p.value); }).join("");
}

// Mirrors eventSummary in console_pages.go.
function summary(data) {
  var s = JSON.stringify(data);
  if (s === "null" || s === "{}") return "";
  return s.length > 300 ? s.slice(0, 300) + "…" : s;
}

function isoSecond(t) { return t ? t.replace(/\.\d+/, "").replace(/\+00:00$/, "Z") : ""; }

// One timeline entry, as the "event" template renders it.
function eventItem(ev) {
  var li = el("li", "ev k-" + ev.kind);
  li.dataset.seq = ev.sequence;
  li.appendChild(el("span", "seq", String(ev.sequence)));
  li.appendChild(document.createTextNode(" "));
  var t = el("time", "", isoSecond(ev.created_at).replace("T", " "));
  t.setAttribute("datetime", ev.created_at);
  li.appendChild(t);
  li.appendChild(document.createTextNode(" "));
  li.appendChild(el("span", "kind", ev.kind));
  if (ev.kind === "turn.output") {
    li.appendChild(el("pre", "out", contentText(ev.data && ev.data.content)));
  } else {
    var s = summary(ev.data);
    if (s) { li.appendChild(document.createTextNode(" ")); li.appendChild(el("code", "data", s)); }
  }
  return li;
}

// Re-render the parts of the page that events change (status, holds,
// questions, Turns) from the server: one renderer, the server's. A panel
// the user is typing in is left alone until they leave it.
var refreshTimer = null, refreshPending = false;
function refreshState() {
  var state = document.getElementById("state");
  if (!state) return;
  var a = document.activeElement;
  if (a && state.contains(a) && (a.tagName === "TEXTAREA" || a.tagName === "INPUT")) {
    refreshPending = true;
    return;
  }
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(function () {
    fetch(location.pathname, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var fresh = doc.getElementById("state");
      if (fresh) state.replaceWith(fresh);
    }).catch(function () {});
  }, 250);
}
document.addEventListener("focusout", function () {
  if (refreshPending) { refreshPending = false; setTimeout(refreshState, 0); }
});

function setLive(text) {
  var live = document.getElementById("live");
  if (live) live.textContent = text;
}

function followTimeline(ol) {
  var url = ol.dataset.stream + "?after=" + encodeURIComponent(ol.dataset.after || "0");
  var es = new EventSource(url);
  es.onopen = function () { setLive("● live"); };
  es.onerror = function () { setLive("reconnecting…"); };
  es.onmessage = function (m) {
    var ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    if (ol.querySelector('li[data-seq="' + ev.sequence + '"]')) return;
    ol.appendChild(eventItem(ev));
    if (ev.kind !== "turn.output") refreshState();
  };
}

function followLogs(pre) {
  var es = new EventSource(pre.dataset.logs);
  es.onopen = function () { setLive("● live"); };
  es.addEventListener("output", function (m) {
    var rec = JSON.parse(m.data);
    var bytes = Uint8Array.from(atob(rec.data || ""), function (c) { return c.charCodeAt(0); });
    var span = el("span", rec.stream === "stderr" ? "stderr" : "", new TextDecoder().decode(bytes));
    pre.appendChild(span);
  });
  es.addEventListener("end", function (m) {
    es.close();
    setLive("ended");
    try {
      var c = JSON.parse(m.data);
      var st = document.getElementById("cmd-status"), ex = document.getElementById("cmd-exit");
      if (st) st.textContent = c.status;
      if (ex && c.exit_code !== undefined) ex.textContent = String(c.exit_code);
    } catch (e) {}
  });
}

document.addEventListener("DOMContentLoaded", function () {
  var ol = document.getElementById("timeline");
  if (ol && ol.dataset.stream && window.EventSource) followTimeline(ol);
  var logs = document.getElementById("logs");
  if (logs && logs.dataset.logs && window.EventSource) followLogs(logs);
});

// The Sessions page's counts stay current: read again every 5 s while the
// page is visible.
(function () {
  var box = document.getElementById("live-counts");
  if (!box || !window.fetch) return;
  function update() {
    if (document.hidden) return;
    fetch(box.getAttribute("data-counts"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (c) {
        if (!c) return;
        box.querySelectorAll("[data-n]").forEach(function (n) {
          var v = c[n.getAttribute("data-n")];
          if (v !== undefined) n.textContent = String(v);
        });
      })
      .catch(function () {});
  }
  setInterval(update, 5000);
})();

