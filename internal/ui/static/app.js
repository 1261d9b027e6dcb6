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

// The new workspace form (and a workspace's version control setting):
// choosing a VCS provider's token offers the repositories it reads
// (fetched from the page's organization) in the repository field's
// datalist. When they cannot be listed (the host is down, the token
// refused), a notice after the field says so, with what the server said;
// the repository is still typed by hand. Without this file the field is
// typed.
document.querySelectorAll("select[data-repositories]").forEach(function (sel) {
  var list = document.getElementById(sel.dataset.list);
  if (!list) return;
  var notice = document.createElement("p");
  notice.className = "repositories-error";
  notice.setAttribute("role", "status");
  notice.hidden = true;
  list.after(notice);
  function say(text) {
    notice.textContent = text;
    notice.hidden = text === "";
  }
  function load() {
    var token = sel.value;
    list.textContent = "";
    delete list.dataset.loaded;
    delete list.dataset.failed;
    say("");
    if (!token) return;
    fetch(sel.dataset.repositories + "/" + encodeURIComponent(token) + "/repositories", { credentials: "same-origin" })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (d) {
          if (r.ok) return d;
          throw new Error(d.error || "the server answered " + r.status);
        });
      })
      .then(function (d) {
        if (sel.value !== token) return; // another token was chosen meanwhile
        (d.repositories || []).forEach(function (name) {
          var o = document.createElement("option");
          o.value = name;
          list.appendChild(o);
        });
        list.dataset.loaded = token;
      })
      .catch(function (err) {
        if (sel.value !== token) return;
        list.dataset.failed = token;
        say("Could not list repositories: " + (err instanceof TypeError ? "the server did not answer" : err.message) +
          ". Type the repository (owner/name) instead.");
      });
  }
  sel.addEventListener("change", load);
  load();
});

// The add VCS provider form: a provider with only one address (GitHub.com,
// its option's data-http-url and data-api-url) fills the URL fields in
// when chosen; choosing another clears them if they still hold those
// addresses. Without this file the server fills GitHub.com's in when the
// fields are left empty.
document.querySelectorAll("select[data-provider-urls]").forEach(function (sel) {
  var form = sel.form;
  var fields = { httpUrl: form.elements["http_url"], apiUrl: form.elements["api_url"] };
  var before = sel.selectedOptions[0];
  sel.addEventListener("change", function () {
    var now = sel.selectedOptions[0];
    Object.keys(fields).forEach(function (k) {
      var f = fields[k];
      if (!f) return;
      var old = (before && before.dataset[k]) || "";
      if (f.value === "" || (old !== "" && f.value === old)) f.value = now.dataset[k] || "";
    });
    before = now;
  });
});
