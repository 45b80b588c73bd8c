// The little the pages do in the browser: local times on hover, and the overview's refresh.
"use strict";

document.querySelectorAll("time[datetime]").forEach(function (node) {
  var moment = new Date(node.getAttribute("datetime"));
  if (!isNaN(moment)) {
    node.title = moment.toLocaleString();
  }
});

var live = document.getElementById("live");
if (live) {
  var key = "warren.live";
  live.checked = window.localStorage.getItem(key) !== "off";
  live.addEventListener("change", function () {
    window.localStorage.setItem(key, live.checked ? "on" : "off");
  });
  var seconds = Number(live.getAttribute("data-refresh")) || 10;
  window.setInterval(function () {
    if (live.checked && document.visibilityState === "visible") {
      window.location.reload();
    }
  }, seconds * 1000);
}
