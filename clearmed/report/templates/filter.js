// The question list's filters, search and sort; the state is kept in the address so a filtered list can be linked.
(function () {
  var body = document.getElementById("questions").tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var controls = Array.prototype.slice.call(document.querySelectorAll("[data-filter]"));
  var shown = document.getElementById("shown");
  function value(name) { var c = controls.filter(function (x) { return x.dataset.filter === name; })[0]; return c ? c.value : ""; }
  function apply() {
    var query = value("q").trim().toLowerCase(), count = 0, state = [];
    rows.forEach(function (row) {
      var keep = controls.every(function (c) {
        var name = c.dataset.filter;
        return !c.value || name === "q" || name === "sort" || row.dataset[name] === c.value;
      }) && (!query || row.textContent.toLowerCase().indexOf(query) >= 0);
      row.hidden = !keep;
      count += keep ? 1 : 0;
    });
    var key = value("sort") || "index";
    rows.slice().sort(function (a, b) {
      return key === "index" ? a.dataset.index - b.dataset.index : b.dataset[key] - a.dataset[key];
    }).forEach(function (row) { body.appendChild(row); });
    shown.textContent = count + " of " + rows.length + " shown";
    controls.forEach(function (c) { if (c.value && !(c.dataset.filter === "sort" && c.value === "index")) state.push(c.dataset.filter + "=" + encodeURIComponent(c.value)); });
    history.replaceState(null, "", state.length ? "#" + state.join("&") : location.pathname);
  }
  location.hash.slice(1).split("&").forEach(function (part) {
    var at = part.indexOf("="), name = part.slice(0, at), val = decodeURIComponent(part.slice(at + 1));
    controls.forEach(function (c) { if (at > 0 && c.dataset.filter === name) c.value = val; });
  });
  controls.forEach(function (c) { c.addEventListener(c.tagName === "INPUT" ? "input" : "change", apply); });
  apply();
})();
