// mindstore viewer: small conveniences on top of pages that work without script.
// Served by the app itself ('self' in the Content-Security-Policy); no inline handlers.
"use strict";
(function () {
  function setAll(open) {
    document.querySelectorAll("main details").forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll(".toolbar[data-fold]").forEach(function (bar) {
    [["Expand all", true], ["Collapse all", false]].forEach(function (spec) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = spec[0];
      b.className = spec[1] ? "expand-all" : "collapse-all";
      b.addEventListener("click", function () { setAll(spec[1]); });
      bar.appendChild(b);
    });
  });
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
})();
