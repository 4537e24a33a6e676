// mindstore viewer: small conveniences on top of pages that work without script.
// Served by the app itself ('self' in the Content-Security-Policy); no inline handlers.
"use strict";
(function () {
  function setAll(open) {
    document.querySelectorAll("main details").forEach(function (d) { d.open = open; });
  }
  // The toolbar buttons of a (possibly freshly swapped-in) page.
  function enhance(root) {
    root.querySelectorAll(".toolbar[data-fold]").forEach(function (bar) {
      [["Expand all", true], ["Collapse all", false]].forEach(function (spec) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = spec[0];
        b.className = spec[1] ? "expand-all" : "collapse-all";
        b.addEventListener("click", function () { setAll(spec[1]); });
        bar.appendChild(b);
      });
    });
  }
  enhance(document);
  // Keyboard: "[" and "]" switch to the previous/next branch at the focused message (or the
  // last branch point on screen); "e"/"c" expand/collapse everything.
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA")) return;
    if (ev.key === "e") setAll(true);
    else if (ev.key === "c") setAll(false);
    else if (ev.key === "[" || ev.key === "]") {
      var all = document.querySelectorAll(".branches");
      var nav = document.querySelector(".msg.focus > .branches") || all[all.length - 1];
      if (!nav) return;
      var items = Array.prototype.slice.call(nav.querySelectorAll(".branch"));
      var cur = items.findIndex(function (x) { return x.classList.contains("current"); });
      var next = items[cur + (ev.key === "]" ? 1 : -1)];
      if (next && next.href) window.location.assign(next.href);
    }
  });
  var focus = document.querySelector(".msg.focus");
  if (focus && !window.location.hash) focus.scrollIntoView({ block: "center" });

  // Live pages: follow the store's change feed (server-sent events from /api/events) and,
  // when something this page shows changed, fetch the page again and swap its <main> in
  // place. Open <details> stay open; a reader at the bottom stays at the bottom.
  var live = document.querySelector("[data-live]");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var params = new URLSearchParams({
    ns: live.dataset.ns, id: live.dataset.session, since: live.dataset.since
  });
  var source = new EventSource("/api/events?" + params.toString());
  var timer = null, busy = false, again = false, lastSeq = Number(live.dataset.since) || 0;
  function status(text) {
    var el = document.querySelector("[data-live]");
    if (el) el.textContent = text;
  }
  function refresh() {
    timer = null;
    if (busy) { again = true; return; }
    busy = true;
    var atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    var openIds = Array.prototype.map.call(
      document.querySelectorAll("main details[open]"),
      function (d) { return d.closest("[id]") ? d.closest("[id]").id : null; }
    ).filter(Boolean);
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("main"), current = document.querySelector("main");
        if (!fresh || !current) return;
        current.replaceWith(fresh);
        enhance(fresh);
        openIds.forEach(function (id) {
          var holder = document.getElementById(id);
          var d = holder && holder.querySelector("details");
          if (d) d.open = true;
        });
        var el = document.querySelector("[data-live]");
        if (el) {
          el.dataset.seq = String(lastSeq);
          el.textContent = "updated " + new Date().toLocaleTimeString();
        }
        if (atBottom) window.scrollTo(0, document.body.scrollHeight);
      })
      .catch(function () { status("live update failed; reload to see the latest"); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  source.addEventListener("change", function (ev) {
    try { lastSeq = JSON.parse(ev.data).seq; } catch (e) { return; }
    if (!timer) timer = setTimeout(refresh, 100);
  });
  source.addEventListener("open", function () {
    var el = document.querySelector("[data-live]");
    if (el && !el.textContent) el.textContent = "live";
  });
})();
