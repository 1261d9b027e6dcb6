// Live logs: a <pre data-live="…/logs/plan"> follows its phase's log over
// server-sent events; when the log ends the page reloads to show the run's
// new status and actions. Pages work without this file.
"use strict";
document.querySelectorAll("pre[data-live]").forEach(function (pre) {
  var es = new EventSource(pre.dataset.live);
  es.onmessage = function (e) {
    var text = e.data;
    var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent += text;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };
  es.addEventListener("end", function () {
    es.close();
    pre.removeAttribute("data-live");
    pre.dataset.ended = "true";
    setTimeout(function () { window.location.reload(); }, 300);
  });
});
