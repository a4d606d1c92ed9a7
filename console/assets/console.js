// Live updates for the Portcullis console: every few seconds the page's
// live region is fetched again (?partial=1) and replaced when it changed,
// unless the caller is typing in it or paused updates. Focus stays on the
// same control; a polite live region announces what changed.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) return;
  var every = parseInt(live.getAttribute("data-poll"), 10) || 2000;
  var status = document.getElementById("live-status");
  var when = document.getElementById("live-when");
  var toggle = document.getElementById("live-toggle");
  var paused = false, dirty = false, busy = false;
  var tpl = document.createElement("template");
  var last = live.innerHTML; // as the browser serialises the server's render
  var focusable = "a[href], button, input, textarea, select, summary";
  function normalise(html) { tpl.innerHTML = html; return tpl.innerHTML; }

  function summary() {
    var s = live.querySelector("[data-live-summary]");
    return s ? s.textContent.trim() : "";
  }
  live.addEventListener("input", function () { dirty = true; });
  live.addEventListener("change", function () { dirty = true; });
  live.addEventListener("submit", function () { dirty = true; });
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
      toggle.textContent = paused ? "Resume updates" : "Pause updates";
      toggle.parentNode.classList.toggle("paused", paused);
      if (when) when.textContent = paused ? "updates paused" : "live, every " + every + " ms";
    });
  }
  function stamp() {
    var d = new Date();
    return d.toISOString().substring(11, 19) + " UTC";
  }
  function tick() {
    if (paused || dirty || busy || document.hidden) return;
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    fetch(url.toString(), { credentials: "same-origin", cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (res.status === 401) {
          if (status) status.textContent = "Your session ended. Sign in again.";
          paused = true;
          return null;
        }
        return res.ok ? res.text() : null;
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        if (when) when.textContent = "updated " + stamp();
        html = normalise(html);
        if (html === last || dirty) return;
        var before = summary();
        last = html;
        var active = document.activeElement && live.contains(document.activeElement) ? document.activeElement : null;
        var focused = active ? active.id : "";
        var index = active ? Array.prototype.indexOf.call(live.querySelectorAll(focusable), active) : -1;
        var open = [];
        live.querySelectorAll("details").forEach(function (d, i) { if (d.open) open.push(i); });
        live.innerHTML = html;
        var ds = live.querySelectorAll("details");
        open.forEach(function (i) { if (ds[i]) ds[i].open = true; });
        var again = focused ? document.getElementById(focused) : null;
        if (!again && index >= 0) again = live.querySelectorAll(focusable)[index];
        if (again) again.focus();
        var after = summary();
        if (status && after && after !== before) status.textContent = "Updated: " + after;
      })
      .catch(function () { if (when) when.textContent = "update failed, retrying"; })
      .then(function () { busy = false; });
  }
  setInterval(tick, every);
})();
