// Live counts on the queues page: every few seconds the page asks the
// server for every queue's counts and writes them into the table, without
// reloading. Values are set as text, never as HTML.
(function () {
  "use strict";
  var table = document.getElementById("queues");
  if (!table) return;
  var url = table.getAttribute("data-live");
  var fields = ["pending", "waiting", "processing", "completed", "cancelled"];
  function setText(row, field, value) {
    var cell = row.querySelector('[data-field="' + field + '"]');
    if (cell && cell.textContent !== String(value)) cell.textContent = String(value);
  }
  var known = Array.prototype.map.call(table.querySelectorAll("tbody tr"), function (r) { return r.getAttribute("data-queue"); });
  var note = document.getElementById("new-queues");
  function update(queues) {
    // Queues that appeared since the page loaded are named, for a reload.
    var added = queues.filter(function (q) { return known.indexOf(q.Name) < 0; }).map(function (q) { return q.Name; });
    if (note) note.textContent = added.length ? "New queues since this page loaded: " + added.join(", ") + ". Reload to see them." : "";
    var rows = table.querySelectorAll("tbody tr");
    var byName = {};
    queues.forEach(function (q) { byName[q.Name] = q; });
    rows.forEach(function (row) {
      var q = byName[row.getAttribute("data-queue")];
      if (!q) return;
      fields.forEach(function (f) { setText(row, f, q[f.charAt(0).toUpperCase() + f.slice(1)]); });
      var queueLink = row.querySelector("th a");
      // A count of dead or delayed messages links to them; none is plain
      // text.
      [["dead", q.Dead, "/dead"], ["delayed", q.Delayed, "/scheduled"]].forEach(function (c) {
        var cell = row.querySelector('[data-field="' + c[0] + '"]');
        if (!cell || !queueLink || cell.textContent === String(c[1])) return;
        cell.textContent = "";
        if (c[1] > 0) {
          var link = document.createElement("a");
          link.setAttribute("href", queueLink.getAttribute("href") + c[2]);
          link.textContent = String(c[1]);
          cell.appendChild(link);
        } else {
          cell.textContent = "0";
        }
      });
      setText(row, "oldest", q.Oldest);
      var chart = row.querySelector('[data-field="chart"]');
      if (chart) {
        ["Completed", "Failed", "Dead"].forEach(function (line) {
          var path = chart.querySelector("path." + line.toLowerCase());
          if (path) path.setAttribute("d", q.Chart[line] || "");
        });
        var svg = chart.querySelector("svg");
        if (svg) svg.setAttribute("aria-label", q.Chart.Summary);
        var rate = chart.querySelector(".rate");
        if (rate) rate.textContent = q.Chart.Last;
      }
      var form = row.querySelector("form");
      if (form) {
        form.setAttribute("action", form.getAttribute("action").replace(/\/(pause|resume)$/, q.Paused ? "/resume" : "/pause"));
        var button = form.querySelector("button");
        if (button && button.firstChild) button.firstChild.textContent = q.Paused ? "Resume" : "Pause";
      }
      var status = row.querySelector('[data-field="status"] .badge');
      if (status) {
        status.textContent = q.Paused ? "paused" : "running";
        status.className = "badge " + (q.Paused ? "paused" : "running");
      }
    });
  }
  function poll() {
    fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (qs) { if (qs) update(qs); })
      .catch(function () {})
      .finally(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 3000);
})();
